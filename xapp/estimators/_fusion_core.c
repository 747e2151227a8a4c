/* Fusion of many paths in C: the compiled twin of ``fuse_many`` in
 * xapp/estimators/fusion_many.py. Read the Python first: the rules, and why each is there, are
 * told in fusion.py and followed in fusion_many.py; this file only follows them again, path by
 * path, with the same floating-point operations in the same order, so that both twins give the
 * same bits (tests/test_fusion_core.py compares them on generated tables).
 *
 * Why: a fleet's step fuses every path it decides (3,000 a step part), and the numpy twin makes
 * some ninety array operations on (paths x sources) tables each time, each a pass over memory
 * and a few microseconds of dispatch; here one pass over the rows does all of it.
 *
 * numpy's semantics where they differ from C's own:
 * - np.maximum and np.minimum give NaN when either side is NaN (C's fmax/fmin do not);
 * - np.argmax gives the first NaN when there is one, else the first largest;
 * - a row's sum over the sources adds column after column from the first (numpy's reduction
 *   over a short last axis), and ``row_max`` / ``row_min`` (core/rowwise.py) fold the same way.
 *
 * Arrays come in through the buffer protocol, C-contiguous: (paths x sources) tables, flags as
 * numpy bools (one byte, 0 or 1), counts as int64, the kind out as int8. Built without fused
 * multiply-adds (setup.py), as the policy's core. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_SOURCES 16

/* fusion_many.py's kinds */
enum { NONE = 0, DOWN = 1, BOUND = 2, FUSED = 3 };

static inline double np_maximum(double a, double b) {
    if (a != a) return a;
    if (b != b) return b;
    return a >= b ? a : b;
}

static inline double np_minimum(double a, double b) {
    if (a != a) return a;
    if (b != b) return b;
    return a <= b ? a : b;
}

/* fusion_many.py's _quadrature: sqrt(a * a + b * b), in that order. */
static inline double quadrature(double a, double b) { return sqrt(a * a + b * b); }

/* np.argmax of one row: the first NaN, else the first largest. */
static inline int argmax_of(const double *values, int count) {
    int at = 0;
    for (int s = 0; s < count; s++) {
        if (values[s] != values[s]) return s;
        if (values[s] > values[at]) at = s;
    }
    return at;
}

/* row_max / row_min of one row: folded from the first column with np.maximum / np.minimum. */
static inline double fold_max(const double *values, int count) {
    double m = values[0];
    for (int s = 1; s < count; s++) m = np_maximum(m, values[s]);
    return m;
}

static inline double fold_min(const double *values, int count) {
    double m = values[0];
    for (int s = 1; s < count; s++) m = np_minimum(m, values[s]);
    return m;
}

typedef struct {
    double now_s, max_age_s, drift_ratio_per_s, min_stddev, sharpness_ratio, max_bias,
        caught_up, caught_up_after_s;
    int64_t bias_after;
} Settings;

/* The inputs of one row (path) and what it gives; pointers into the callers' tables. */
typedef struct {
    const uint8_t *present, *available, *lower_bound, *recorded;
    const double *capacity, *stddev, *measured_at, *bias, *square;
    const int64_t *count;
    double silent_since, own_square;
    int64_t own_count;
} Row;

typedef struct {
    int8_t kind;
    double capacity, stddev, measured_at;
    uint8_t lower_bound;
} Fused;

/* fuse_many for one row of ``sources`` sources (``measuring``: per source). */
static Fused fuse_row(const Row *r, int sources, const uint8_t *measuring, const Settings *k) {
    double age[MAX_SOURCES], masked[MAX_SOURCES], track[MAX_SOURCES];
    double capacity[MAX_SOURCES], records[MAX_SOURCES], sigmas[MAX_SOURCES];
    int found[MAX_SOURCES], exact[MAX_SOURCES], bounds[MAX_SOURCES], kept[MAX_SOURCES];
    int any_found = 0, any_shows_usable = 0, any_exact = 0, any_bounds = 0;
    for (int s = 0; s < sources; s++) {
        age[s] = np_maximum(0.0, k->now_s - r->measured_at[s]);
        found[s] = r->present[s] && age[s] <= k->max_age_s;
        any_found |= found[s];
        any_shows_usable |= found[s] && r->available[s] && !r->lower_bound[s] &&
                            r->capacity[s] > 0 && r->measured_at[s] >= r->silent_since;
        const int usable = found[s] && r->available[s];
        exact[s] = usable && !r->lower_bound[s];
        bounds[s] = usable && r->lower_bound[s];
        any_exact |= exact[s];
        any_bounds |= bounds[s];
        track[s] = r->recorded[s] ? sqrt(r->square[s]) : 0.0;
    }
    /* The newest word on the path: the first source with the latest measurement. */
    for (int s = 0; s < sources; s++) masked[s] = found[s] ? r->measured_at[s] : -INFINITY;
    const int newest = argmax_of(masked, sources);
    const double newest_at = r->measured_at[newest];
    const int silent = !(r->silent_since != r->silent_since) && !any_shows_usable;
    const int down = any_found && (!r->available[newest] || silent);
    const int bound_only = any_found && !down && !any_exact;

    /* Only lower bounds: the largest (the first of equals). */
    for (int s = 0; s < sources; s++) masked[s] = bounds[s] ? r->capacity[s] : -INFINITY;
    const int best = argmax_of(masked, sources);
    const double best_capacity = r->capacity[best];
    const double best_drift = k->drift_ratio_per_s * best_capacity * age[best];
    const double best_sigma = np_maximum(
        quadrature(np_maximum(r->stddev[best], track[best]), best_drift), k->min_stddev);

    /* Exact sources: of the measurements only the newest speaks. */
    for (int s = 0; s < sources; s++)
        masked[s] = exact[s] && measuring[s] ? r->measured_at[s] : -INFINITY;
    const double newest_measured = fold_max(masked, sources);
    for (int s = 0; s < sources; s++)
        exact[s] = exact[s] && (!measuring[s] || r->measured_at[s] >= newest_measured);
    /* Each corrected for its bias where it has shown one (a source that is not a
     * measurement). */
    for (int s = 0; s < sources; s++) {
        const double bias = r->bias[s];
        const int corrects = r->recorded[s] && r->count[s] >= k->bias_after && !measuring[s] &&
                             fabs(bias) <= k->max_bias;
        const double factor = bias < 0 ? 1 / (1 + bias) : 1 - bias;
        capacity[s] = corrects ? r->capacity[s] * factor : r->capacity[s];
        const double stddev = corrects ? r->stddev[s] * factor : r->stddev[s];
        const double drift = k->drift_ratio_per_s * capacity[s] * age[s];
        records[s] =
            np_maximum(quadrature(np_maximum(stddev, track[s]), drift), k->min_stddev);
        sigmas[s] = np_maximum(quadrature(np_maximum(stddev, 0.0), drift), k->min_stddev);
    }
    for (int s = 0; s < sources; s++) masked[s] = exact[s] ? records[s] : INFINITY;
    const double most_reliable = fold_min(masked, sources);
    for (int s = 0; s < sources; s++)
        kept[s] = exact[s] && records[s] <= k->sharpness_ratio * most_reliable;
    double total = 0, weighted = 0;
    for (int s = 0; s < sources; s++) {
        const double weight = kept[s] ? 1.0 / (records[s] * records[s]) : 0.0;
        const double part = weight * (kept[s] ? capacity[s] : 0.0);
        total = s == 0 ? weight : total + weight;
        weighted = s == 0 ? part : weighted + part;
    }
    const double mean = weighted / total;
    for (int s = 0; s < sources; s++) masked[s] = bounds[s] ? r->capacity[s] : -INFINITY;
    const double floor = any_bounds ? fold_max(masked, sources) : 0.0;
    const double value = floor > mean ? floor : mean;
    for (int s = 0; s < sources; s++) masked[s] = kept[s] ? sigmas[s] : INFINITY;
    const double stated = fold_min(masked, sources);
    /* Fusion's own record, once it has one, where it forecasts better than the sources
     * state. */
    const double own_drift = k->drift_ratio_per_s * mean * age[newest];
    const double shown =
        np_maximum(quadrature(sqrt(r->own_square), own_drift), k->min_stddev);
    double sigma = r->own_count >= k->bias_after ? np_minimum(stated, shown) : stated;
    /* Bounded below by what the path carried just now. */
    const int floored = floor > 0;
    if (floored) sigma = np_minimum(sigma, np_maximum(value - floor, k->min_stddev));
    for (int s = 0; s < sources; s++) masked[s] = kept[s] ? r->measured_at[s] : -INFINITY;
    const double newest_exact = fold_max(masked, sources);
    for (int s = 0; s < sources; s++) masked[s] = bounds[s] ? r->measured_at[s] : -INFINITY;
    const double newest_bound = fold_max(masked, sources);
    const int is_caught_up = floored && newest_bound - newest_exact >= k->caught_up_after_s &&
                             floor >= k->caught_up * value;

    Fused out;
    out.kind = !any_found ? NONE : down ? DOWN : bound_only ? BOUND : FUSED;
    out.capacity = down ? 0.0 : bound_only ? best_capacity : value;
    out.stddev = down ? 0.0 : bound_only ? best_sigma : sigma;
    out.measured_at = newest_at;
    out.lower_bound = bound_only ? 1 : (uint8_t)is_caught_up;
    return out;
}

/* ------------------------------------------------------------------- argument handling */

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

enum {
    PRESENT, CAPACITY, STDDEV, MEASURED_AT, AVAILABLE, LOWER_BOUND, RECORDED, COUNT, BIAS,
    SQUARE,                                      /* (paths x sources) */
    MEASURING,                                   /* (sources) */
    SILENT_SINCE, OWN_COUNT, OWN_SQUARE,         /* (paths) */
    OUT_KIND, OUT_CAPACITY, OUT_STDDEV, OUT_MEASURED_AT, OUT_LOWER_BOUND, /* (paths), out */
    ARRAYS
};

static const char *const names[ARRAYS] = {
    "present", "capacity", "stddev", "measured_at", "available", "lower_bound", "recorded",
    "count", "bias", "square", "measuring", "silent_since", "own_count", "own_square",
    "kind", "capacity out", "stddev out", "measured_at out", "lower_bound out",
};
static const Py_ssize_t item_sizes[ARRAYS] = {1, 8, 8, 8, 1, 1, 1, 8, 8, 8, 1,
                                              8, 8, 8, 1, 8, 8, 8, 1};

static void release(Buffer *buffers) {
    for (int i = 0; i < ARRAYS; i++) {
        if (buffers[i].held) PyBuffer_Release(&buffers[i].view);
    }
}

static PyObject *fuse(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[ARRAYS];
    Py_ssize_t paths;
    int sources;
    Settings k;
    long long bias_after;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOOOOnidddddLddd", &objects[0], &objects[1],
                          &objects[2], &objects[3], &objects[4], &objects[5], &objects[6],
                          &objects[7], &objects[8], &objects[9], &objects[10], &objects[11],
                          &objects[12], &objects[13], &objects[14], &objects[15], &objects[16],
                          &objects[17], &objects[18], &paths, &sources, &k.now_s, &k.max_age_s,
                          &k.drift_ratio_per_s, &k.min_stddev, &k.sharpness_ratio, &bias_after,
                          &k.max_bias, &k.caught_up, &k.caught_up_after_s))
        return NULL;
    k.bias_after = bias_after;
    if (paths < 0 || sources < 1 || sources > MAX_SOURCES) {
        PyErr_Format(PyExc_ValueError, "sizes out of range: %zd paths, %d sources (1..%d)",
                     paths, sources, MAX_SOURCES);
        return NULL;
    }
    Buffer buffers[ARRAYS] = {0};
    for (int i = 0; i < ARRAYS; i++) {
        const Py_ssize_t items = i <= SQUARE ? paths * sources : i == MEASURING ? sources : paths;
        const int writable = i >= OUT_KIND;
        if (PyObject_GetBuffer(objects[i], &buffers[i].view,
                               PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) {
            release(buffers);
            return NULL;
        }
        buffers[i].held = 1;
        if (buffers[i].view.len != items * item_sizes[i]) {
            PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, not %zd", names[i],
                         buffers[i].view.len, items * item_sizes[i]);
            release(buffers);
            return NULL;
        }
    }
#define IN(type, which) ((const type *)buffers[which].view.buf)
#define OUT(type, which) ((type *)buffers[which].view.buf)
    const uint8_t *measuring = IN(uint8_t, MEASURING);
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t p = 0; p < paths; p++) {
        const Py_ssize_t at = p * sources;
        const Row row = {
            IN(uint8_t, PRESENT) + at,
            IN(uint8_t, AVAILABLE) + at,
            IN(uint8_t, LOWER_BOUND) + at,
            IN(uint8_t, RECORDED) + at,
            IN(double, CAPACITY) + at,
            IN(double, STDDEV) + at,
            IN(double, MEASURED_AT) + at,
            IN(double, BIAS) + at,
            IN(double, SQUARE) + at,
            IN(int64_t, COUNT) + at,
            IN(double, SILENT_SINCE)[p],
            IN(double, OWN_SQUARE)[p],
            IN(int64_t, OWN_COUNT)[p],
        };
        const Fused fused = fuse_row(&row, sources, measuring, &k);
        OUT(int8_t, OUT_KIND)[p] = fused.kind;
        OUT(double, OUT_CAPACITY)[p] = fused.capacity;
        OUT(double, OUT_STDDEV)[p] = fused.stddev;
        OUT(double, OUT_MEASURED_AT)[p] = fused.measured_at;
        OUT(uint8_t, OUT_LOWER_BOUND)[p] = fused.lower_bound;
    }
    Py_END_ALLOW_THREADS;
#undef IN
#undef OUT
    release(buffers);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fuse", fuse, METH_VARARGS, "fuse(...): fusion_many.py's fuse_many, over the same arrays."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "xapp.estimators._fusion_core",
    "Fusion of many paths at once (fusion_many.py's twin).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fusion_core(void) {
    PyObject *made = PyModule_Create(&module);
    if (made == NULL) return NULL;
    if (PyModule_AddStringConstant(made, "SOURCE_SHA256", SOURCE_SHA256) < 0 ||
        PyModule_AddIntConstant(made, "MAX_SOURCES", MAX_SOURCES) < 0) {
        Py_DECREF(made);
        return NULL;
    }
    return made;
}
