/* The silence tracker's walk over a step's samples in C: the compiled twin of ``_walk`` in
 * xapp/estimators/outage.py. Read the Python first: what a silent path is, what each column
 * holds and why each test is there is said there, once.
 *
 * Both trackers (fusion's and the probe planner's) walk every sample of every step, in order
 * (a path's period is told by the samples before it). In Python each sample cost a dozen
 * dictionary look-ups and comparisons; here the step comes in as arrays (the samples' path
 * places, times, throughputs and whether the weights give the path a share) and the state is
 * the tracker's columns, so the walk touches no Python object. The two twins are run side by
 * side on the same steps and compared with the tracker as first written
 * (tests/test_outage_silence.py).
 *
 * Arrays come in through the buffer protocol, C-contiguous: places and chains as intp
 * (Py_ssize_t), times and throughputs as float64, flags as numpy bools (one byte, 0 or 1).
 * Every place is checked against its column's length before it is read.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

enum {
    PLACES, TIME, THROUGHPUT, WEIGHTED,                     /* the step, one per sample */
    PERIOD_OF, NEXT_PATH, SINCE, QUIET,                     /* per path place */
    PERIOD_TIME, PERIOD_CARRIED, PERIOD_STARTED, FIRST_PATH, /* per period */
    ARRAYS
};

static const char *const names[ARRAYS] = {
    "places", "time_s", "throughput", "weighted", "period_of", "next_path",
    "since", "quiet", "period_time", "period_carried", "period_started", "first_path",
};
static const Py_ssize_t item_sizes[ARRAYS] = {
    sizeof(Py_ssize_t), 8, 8, 1, sizeof(Py_ssize_t), sizeof(Py_ssize_t),
    8, 1, 8, 1, 1, sizeof(Py_ssize_t),
};

static void release(Buffer *buffers) {
    for (int i = 0; i < ARRAYS; i++) {
        if (buffers[i].held) PyBuffer_Release(&buffers[i].view);
    }
}

/* Every path place of the step and of every chain inside its column; every period place
 * inside the periods' columns (a wrong place would read or write past an array). */
static int check_places(const Py_ssize_t *places, Py_ssize_t samples, const Py_ssize_t *period_of,
                        const Py_ssize_t *next_path, Py_ssize_t paths,
                        const Py_ssize_t *first_path, Py_ssize_t periods) {
    for (Py_ssize_t i = 0; i < samples; i++) {
        const Py_ssize_t place = places[i];
        if (place < 0 || place >= paths || period_of[place] < 0 || period_of[place] >= periods) {
            PyErr_Format(PyExc_ValueError, "sample %zd: path place %zd has no period", i, place);
            return -1;
        }
    }
    for (Py_ssize_t place = 0; place < paths; place++) {
        if (next_path[place] < -1 || next_path[place] >= paths) {
            PyErr_Format(PyExc_ValueError, "path %zd: next path %zd out of range", place,
                         next_path[place]);
            return -1;
        }
    }
    for (Py_ssize_t period = 0; period < periods; period++) {
        if (first_path[period] < -1 || first_path[period] >= paths) {
            PyErr_Format(PyExc_ValueError, "period %zd: first path %zd out of range", period,
                         first_path[period]);
            return -1;
        }
    }
    return 0;
}

static PyObject *walk(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[ARRAYS];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &objects[6], &objects[7],
                          &objects[8], &objects[9], &objects[10], &objects[11]))
        return NULL;
    Buffer buffers[ARRAYS];
    memset(buffers, 0, sizeof(buffers));
    for (int i = 0; i < ARRAYS; i++) {
        const int writable = i >= PERIOD_OF;
        if (PyObject_GetBuffer(objects[i], &buffers[i].view,
                               PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) {
            release(buffers);
            return NULL;
        }
        buffers[i].held = 1;
        if (buffers[i].view.len % item_sizes[i] != 0) {
            PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of items",
                         names[i], buffers[i].view.len);
            release(buffers);
            return NULL;
        }
    }
#define LENGTH(i) (buffers[i].view.len / item_sizes[i])
    const Py_ssize_t samples = LENGTH(PLACES), paths = LENGTH(PERIOD_OF),
                     periods = LENGTH(PERIOD_TIME);
    if (LENGTH(TIME) != samples || LENGTH(THROUGHPUT) != samples ||
        LENGTH(WEIGHTED) != samples || LENGTH(NEXT_PATH) != paths || LENGTH(SINCE) != paths ||
        LENGTH(QUIET) != paths || LENGTH(PERIOD_CARRIED) != periods ||
        LENGTH(PERIOD_STARTED) != periods || LENGTH(FIRST_PATH) != periods) {
        PyErr_SetString(PyExc_ValueError,
                        "the step's arrays, the paths' and the periods' differ in length");
        release(buffers);
        return NULL;
    }
#undef LENGTH
    const Py_ssize_t *places = buffers[PLACES].view.buf;
    const double *time_s = buffers[TIME].view.buf, *throughput = buffers[THROUGHPUT].view.buf;
    const unsigned char *weighted = buffers[WEIGHTED].view.buf;
    const Py_ssize_t *period_of = buffers[PERIOD_OF].view.buf;
    const Py_ssize_t *next_path = buffers[NEXT_PATH].view.buf;
    double *since = buffers[SINCE].view.buf;
    unsigned char *quiet = buffers[QUIET].view.buf;
    double *period_time = buffers[PERIOD_TIME].view.buf;
    unsigned char *period_carried = buffers[PERIOD_CARRIED].view.buf;
    unsigned char *period_started = buffers[PERIOD_STARTED].view.buf;
    const Py_ssize_t *first_path = buffers[FIRST_PATH].view.buf;
    if (check_places(places, samples, period_of, next_path, paths, first_path, periods) < 0) {
        release(buffers);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < samples; i++) {
        const Py_ssize_t place = places[i], period = period_of[place];
        const double at = time_s[i];
        /* (a chain is walked at most as many steps as there are paths: a broken chain ends) */
        if (at > period_time[period] || !period_started[period]) {
            period_time[period] = at;
            period_carried[period] = 0;
            period_started[period] = 1;
            Py_ssize_t other = first_path[period];
            for (Py_ssize_t n = 0; other >= 0 && n < paths; n++, other = next_path[other])
                quiet[other] = 0;
        }
        const double began = period_time[period];
        if (throughput[i] > 0) {
            since[place] = NAN;
            if (at == began && !period_carried[period]) {
                period_carried[period] = 1;
                Py_ssize_t other = first_path[period];
                for (Py_ssize_t n = 0; other >= 0 && n < paths; n++, other = next_path[other]) {
                    if (quiet[other]) {
                        quiet[other] = 0;
                        if (isnan(since[other])) since[other] = began;
                    }
                }
            }
        } else if (at == began && weighted[i]) {
            if (period_carried[period]) {
                if (isnan(since[place])) since[place] = at;
            } else {
                quiet[place] = 1;
            }
        }
    }
    release(buffers);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "walk(...): outage.py's _walk, over the same arrays."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "xapp.estimators._silence",
    "The silence tracker's walk over a step's samples (outage.py's twin).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__silence(void) {
    PyObject *made = PyModule_Create(&module);
    if (made == NULL) return NULL;
    if (PyModule_AddStringConstant(made, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(made);
        return NULL;
    }
    return made;
}
