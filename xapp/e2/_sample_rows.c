/* The KPI samples of a message read as columns, made in C: the compiled twin of
 * xapp/e2/sample_rows.py's ``samples_of_rows``, which says what is made and why. One sample
 * per UE and direction, in the UEs' order and downlink before uplink; its measurements those
 * of its row that are not NaN, in the columns' order; none where the row has none.
 *
 * Made here, a sample is the object ``KpiSample.made`` makes: ``object.__new__`` of the class,
 * then its ``__dict__`` set whole, the fields in the dataclass's order. A 1,000-CPE period
 * makes 6,000 of them; the Python loop spent about 3 µs on each (a dictionary, eleven
 * arguments, a call), most of the E2 reader's time after decoding.
 * tests/test_sample_rows.py holds the two equal, field for field and key for key. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The field names of KpiSample, in its dataclass order (interned once). */
static PyObject *field_names[11];
static const char *const FIELDS[11] = {
    "cpe_id", "access", "direction", "time_s", "period_s", "throughput_mbps",
    "rtt_ms", "loss_rate_permille", "available", "measurements", "received_s",
};
static PyObject *dict_name;
static PyObject *no_arguments;

typedef struct {
    PyObject *direction;
    Py_buffer values;      /* float64 (ues, measurements), C order */
    PyObject *keys_by_ue;  /* list (ues) of lists (measurements) of str */
    Py_buffer throughput;  /* float64 (ues): NaN where not said */
    Py_buffer link;        /* int8 (ues): -1 not said, 0 down, 1 up */
    Py_ssize_t measured;
} Direction;

static void release(Direction *d, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        PyBuffer_Release(&d[i].values);
        PyBuffer_Release(&d[i].throughput);
        PyBuffer_Release(&d[i].link);
    }
}

static int take_buffer(PyObject *from, Py_buffer *into, const char *format, int ndim,
                       Py_ssize_t ues, const char *what) {
    if (PyObject_GetBuffer(from, into, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (into->ndim != ndim || strcmp(into->format, format) != 0 || into->shape[0] != ues) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d-dimensional %s over %zd UEs", what, ndim,
                     format, ues);
        PyBuffer_Release(into);
        return -1;
    }
    return 0;
}

/* The object KpiSample.made would make, with these fields (references stolen: none). */
static PyObject *made(PyTypeObject *cls, PyObject *const *fields) {
    PyObject *fields_dict = PyDict_New();
    if (fields_dict == NULL) return NULL;
    for (int i = 0; i < 11; i++) {
        if (PyDict_SetItem(fields_dict, field_names[i], fields[i]) < 0) {
            Py_DECREF(fields_dict);
            return NULL;
        }
    }
    PyObject *sample = PyBaseObject_Type.tp_new(cls, no_arguments, NULL);
    if (sample == NULL || PyObject_GenericSetAttr(sample, dict_name, fields_dict) < 0) {
        Py_XDECREF(sample);
        Py_DECREF(fields_dict);
        return NULL;
    }
    Py_DECREF(fields_dict);
    return sample;
}

/* One UE's measurements in one direction: its row's values that are not NaN. */
static PyObject *measurements_of(Direction *d, Py_ssize_t ue) {
    PyObject *keys = PyList_GET_ITEM(d->keys_by_ue, ue);
    if (!PyList_Check(keys) || PyList_GET_SIZE(keys) != d->measured) {
        PyErr_Format(PyExc_ValueError, "UE %zd: expected a list of %zd measurement keys", ue,
                     d->measured);
        return NULL;
    }
    const double *row = (const double *)d->values.buf + ue * d->measured;
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (Py_ssize_t m = 0; m < d->measured; m++) {
        if (isnan(row[m])) continue;
        PyObject *value = PyFloat_FromDouble(row[m]);
        if (value == NULL || PyDict_SetItem(out, PyList_GET_ITEM(keys, m), value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(value);
    }
    return out;
}

static PyObject *samples_of_rows(PyObject *module, PyObject *args) {
    (void)module;
    PyTypeObject *cls;
    PyObject *ids, *access, *received_s, *directions;
    double time_s, period_s;
    if (!PyArg_ParseTuple(args, "O!O!UddOO!", &PyType_Type, &cls, &PyList_Type, &ids, &access,
                          &time_s, &period_s, &received_s, &PyList_Type, &directions))
        return NULL;
    Py_ssize_t ues = PyList_GET_SIZE(ids), count = PyList_GET_SIZE(directions);
    if (count > 2) {
        PyErr_SetString(PyExc_ValueError, "at most two directions");
        return NULL;
    }
    Direction d[2];
    Py_ssize_t taken = 0;
    PyObject *out = NULL, *time_object = NULL, *period_object = NULL;
    for (; taken < count; taken++) {
        PyObject *item = PyList_GET_ITEM(directions, taken);
        PyObject *values, *throughput, *link;
        Direction *one = &d[taken];
        if (!PyArg_ParseTuple(item, "OOO!OO", &one->direction, &values, &PyList_Type,
                              &one->keys_by_ue, &throughput, &link))
            goto done;
        if (take_buffer(values, &one->values, "d", 2, ues, "values") < 0) goto done;
        one->measured = one->values.shape[1];
        if (take_buffer(throughput, &one->throughput, "d", 1, ues, "throughput") < 0) {
            PyBuffer_Release(&one->values);
            goto done;
        }
        if (take_buffer(link, &one->link, "b", 1, ues, "link") < 0) {
            PyBuffer_Release(&one->values);
            PyBuffer_Release(&one->throughput);
            goto done;
        }
        if (PyList_GET_SIZE(one->keys_by_ue) != ues) {
            PyErr_SetString(PyExc_ValueError, "keys_by_ue: one list of keys per UE");
            taken++;
            goto done;
        }
    }
    time_object = PyFloat_FromDouble(time_s);
    period_object = PyFloat_FromDouble(period_s);
    out = PyList_New(0);
    if (time_object == NULL || period_object == NULL || out == NULL) goto failed;
    for (Py_ssize_t ue = 0; ue < ues; ue++) {
        for (Py_ssize_t k = 0; k < count; k++) {
            Direction *one = &d[k];
            PyObject *measurements = measurements_of(one, ue);
            if (measurements == NULL) goto failed;
            if (PyDict_GET_SIZE(measurements) == 0) {
                Py_DECREF(measurements);
                continue;
            }
            double carried = ((const double *)one->throughput.buf)[ue];
            int8_t state = ((const int8_t *)one->link.buf)[ue];
            PyObject *throughput = isnan(carried) ? Py_NewRef(Py_None) : PyFloat_FromDouble(carried);
            if (throughput == NULL) {
                Py_DECREF(measurements);
                goto failed;
            }
            PyObject *available = state < 0 ? Py_None : (state ? Py_True : Py_False);
            PyObject *fields[11] = {
                PyList_GET_ITEM(ids, ue), access,  one->direction, time_object,
                period_object,            throughput, Py_None,     Py_None,
                available,                measurements, received_s,
            };
            PyObject *sample = made(cls, fields);
            Py_DECREF(throughput);
            Py_DECREF(measurements);
            if (sample == NULL || PyList_Append(out, sample) < 0) {
                Py_XDECREF(sample);
                goto failed;
            }
            Py_DECREF(sample);
        }
    }
    goto done;
failed:
    Py_CLEAR(out);
done:
    Py_XDECREF(time_object);
    Py_XDECREF(period_object);
    release(d, taken);
    return out;
}

static PyMethodDef methods[] = {
    {"samples_of_rows", samples_of_rows, METH_VARARGS,
     "samples_of_rows(cls, ids, access, time_s, period_s, received_s, directions): see "
     "xapp/e2/sample_rows.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_sample_rows", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__sample_rows(void) {
    for (int i = 0; i < 11; i++) {
        field_names[i] = PyUnicode_InternFromString(FIELDS[i]);
        if (field_names[i] == NULL) return NULL;
    }
    dict_name = PyUnicode_InternFromString("__dict__");
    no_arguments = PyTuple_New(0);
    if (dict_name == NULL || no_arguments == NULL) return NULL;
    PyObject *created = PyModule_Create(&definition);
    if (created != NULL &&
        PyModule_AddStringConstant(created, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
