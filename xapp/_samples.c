/* KPI samples to and from columns, in C: the compiled twin of xapp/e2/sample_rows.py's
 * ``samples_of_rows`` (a message read as columns into sample objects) and of the readings
 * xapp/estimators/columns.py makes of a step's samples (the objects back into columns). Each
 * Python twin says what is done and why; its tests hold the two equal.
 *
 * ``samples_of_rows``: one sample
 * per UE and direction, in the UEs' order and downlink before uplink; its measurements those
 * of its row that are not NaN, in the columns' order; none where the row has none.
 *
 * Made here, a sample is the object ``KpiSample.made`` makes: allocated for the class, then
 * each field put in its slot, found once from the class's member descriptors. A 1,000-CPE period
 * makes 6,000 of them; the Python loop spent about 3 µs on each (a dictionary, eleven
 * arguments, a call), most of the E2 reader's time after decoding.
 * tests/test_sample_rows.py holds the two equal, field for field and key for key.
 *
 * The readings back: a step's samples grouped by access and direction, a field or a
 * measurement of each sample as a double (NaN where None or absent). The estimators read
 * every sample of a step this way; the Python generator expressions cost 0.2-0.6 µs a
 * sample and name (tests/test_sample_columns.py). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "structmember.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The field names of KpiSample, in its dataclass order (interned once). */
static PyObject *field_names[11];
static const char *const FIELDS[11] = {
    "cpe_id", "access", "direction", "time_s", "period_s", "throughput_mbps",
    "rtt_ms", "loss_rate_permille", "available", "measurements", "received_s",
};

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

/* ``from``'s buffer into ``into``: C-contiguous, ``ndim`` dimensions of ``format`` items, the
 * first of ``count`` (ValueError naming ``what`` otherwise); writable where asked. */
static int take_buffer(PyObject *from, Py_buffer *into, const char *format, int ndim,
                       Py_ssize_t count, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(from, into, flags) < 0) return -1;
    /* (numpy names its int64 'l' where long is 64 bits) */
    int same = strcmp(into->format, format) == 0 ||
               (strcmp(format, "q") == 0 && strcmp(into->format, "l") == 0 && into->itemsize == 8);
    if (into->ndim != ndim || !same || into->shape[0] != count) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d-dimensional %s over %zd items", what,
                     ndim, format, count);
        PyBuffer_Release(into);
        return -1;
    }
    return 0;
}

/* Where each field's slot lies in a sample of the class, found from its member descriptors
 * (a slotted dataclass's fields are members); for the class last asked about. */
static PyTypeObject *slots_of = NULL;
static Py_ssize_t slot_offsets[11];

static int find_slots(PyTypeObject *cls) {
    if (cls == slots_of) return 0;
    for (int i = 0; i < 11; i++) {
        PyObject *descriptor = PyObject_GetAttr((PyObject *)cls, field_names[i]);
        if (descriptor == NULL) return -1;
        int member = Py_IS_TYPE(descriptor, &PyMemberDescr_Type);
        if (member) {
            PyMemberDef *def = ((PyMemberDescrObject *)descriptor)->d_member;
            member = def->type == T_OBJECT_EX && def->offset > 0 &&
                     (size_t)def->offset + sizeof(PyObject *) <= (size_t)cls->tp_basicsize;
            slot_offsets[i] = def->offset;
        }
        Py_DECREF(descriptor);
        if (!member) {
            PyErr_Format(PyExc_TypeError, "%.100s.%s is not a slot", cls->tp_name, FIELDS[i]);
            return -1;
        }
    }
    Py_INCREF(cls); /* (held: its offsets are good for it alone) */
    Py_XDECREF(slots_of);
    slots_of = cls;
    return 0;
}

/* The object KpiSample.made would make, with these fields (references borrowed). */
static PyObject *made(PyTypeObject *cls, PyObject *const *fields) {
    if (find_slots(cls) < 0) return NULL;
    PyObject *sample = cls->tp_alloc(cls, 0);
    if (sample == NULL) return NULL;
    for (int i = 0; i < 11; i++) {
        Py_INCREF(fields[i]);
        *(PyObject **)((char *)sample + slot_offsets[i]) = fields[i];
    }
    /* Out of the cyclic collector's sight: a sample holds strings, numbers, None, a Direction
     * and a dictionary of names to numbers, none of which can lead back to it, so it is never
     * part of a cycle (CPython untracks tuples and dictionaries of such values itself). The
     * probe's and the labeller's histories keep a step's 6,000 samples at 1,000 CPEs, and the
     * pass at the step's end (core/collector.py) walked them: 4.4-5.3 ms a step at 100 ms
     * periods, 0.6-0.8 ms without them. Nothing sets a frozen sample's fields. */
    if (PyObject_IS_GC(sample)) PyObject_GC_UnTrack(sample);
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
        PyObject *key = PyList_GET_ITEM(keys, m);
        /* (a str's hash runs no Python code: nothing can change the lists read here) */
        if (!PyUnicode_CheckExact(key)) {
            PyErr_Format(PyExc_TypeError, "UE %zd: a measurement key is %.100s, not str", ue,
                         Py_TYPE(key)->tp_name);
            Py_DECREF(out);
            return NULL;
        }
        PyObject *value = PyFloat_FromDouble(row[m]);
        if (value == NULL || PyDict_SetItem(out, key, value) < 0) {
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
        if (take_buffer(values, &one->values, "d", 2, ues, 0, "values") < 0) goto done;
        one->measured = one->values.shape[1];
        if (take_buffer(throughput, &one->throughput, "d", 1, ues, 0, "throughput") < 0) {
            PyBuffer_Release(&one->values);
            goto done;
        }
        if (take_buffer(link, &one->link, "b", 1, ues, 0, "link") < 0) {
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

/* ------------------------------------------------------------- the samples back as columns */

static PyObject *access_name, *direction_name;


/* group_codes(samples, codes): each sample's group (its access and direction) numbered in
 * the order first met, into ``codes`` (int64); the groups as [(access, direction), members]
 * in that order. */
static PyObject *group_codes(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *samples, *codes_object;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &samples, &codes_object)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(samples);
    Py_buffer codes_view;
    if (take_buffer(codes_object, &codes_view, "q", 1, count, 1, "codes") < 0) return NULL;
    int64_t *codes = codes_view.buf;
    /* The samples as they are now: reading an attribute may run Python code. */
    PyObject *items = PySequence_Tuple(samples);
    PyObject *numbers = PyDict_New(), *groups = PyList_New(0);
    if (items == NULL || numbers == NULL || groups == NULL) goto failed;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *sample = PyTuple_GET_ITEM(items, i);
        PyObject *access = PyObject_GetAttr(sample, access_name);
        PyObject *direction = access ? PyObject_GetAttr(sample, direction_name) : NULL;
        PyObject *key = direction ? PyTuple_Pack(2, access, direction) : NULL;
        Py_XDECREF(access);
        Py_XDECREF(direction);
        if (key == NULL) goto failed;
        PyObject *number = PyDict_GetItemWithError(numbers, key); /* borrowed */
        Py_ssize_t group;
        if (number == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto failed;
            }
            group = PyList_GET_SIZE(groups);
            PyObject *members = PyList_New(0);
            PyObject *pair = members ? PyTuple_Pack(2, key, members) : NULL;
            PyObject *boxed = pair ? PyLong_FromSsize_t(group) : NULL;
            int bad = boxed == NULL || PyDict_SetItem(numbers, key, boxed) < 0 ||
                      PyList_Append(groups, pair) < 0;
            Py_XDECREF(members);
            Py_XDECREF(pair);
            Py_XDECREF(boxed);
            if (bad) {
                Py_DECREF(key);
                goto failed;
            }
        } else {
            group = PyLong_AsSsize_t(number);
        }
        Py_DECREF(key);
        PyObject *members = PyTuple_GET_ITEM(PyList_GET_ITEM(groups, group), 1);
        if (PyList_Append(members, sample) < 0) goto failed;
        codes[i] = group;
    }
    Py_DECREF(items);
    Py_DECREF(numbers);
    PyBuffer_Release(&codes_view);
    return groups;
failed:
    Py_XDECREF(items);
    Py_XDECREF(numbers);
    Py_XDECREF(groups);
    PyBuffer_Release(&codes_view);
    return NULL;
}

/* A number as the estimators' columns hold it: None as NaN, anything else as float() reads
 * it (-1 with an exception set where it is no number). */
static int as_double(PyObject *value, double *out) {
    if (value == Py_None) {
        *out = NAN;
        return 0;
    }
    *out = PyFloat_AsDouble(value);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* One item's value into ``out[i]`` (0, or -1 with an exception set). */
typedef int (*Put)(PyObject *value, void *out, Py_ssize_t i);

static int put_double(PyObject *value, void *out, Py_ssize_t i) {
    return as_double(value, (double *)out + i);
}

static int put_is_false(PyObject *value, void *out, Py_ssize_t i) {
    ((unsigned char *)out)[i] = value == Py_False;
    return 0;
}

/* Each sample's field ``name`` (args: samples, name, out) put into ``out`` of ``format``. */
static PyObject *each_field(PyObject *args, const char *format, Put put) {
    PyObject *samples, *name, *out_object;
    if (!PyArg_ParseTuple(args, "O!UO", &PyList_Type, &samples, &name, &out_object))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(samples);
    Py_buffer out_view;
    if (take_buffer(out_object, &out_view, format, 1, count, 1, "out") < 0) return NULL;
    PyObject *items = PySequence_Tuple(samples); /* (as now: an attribute may run code) */
    int bad = items == NULL;
    for (Py_ssize_t i = 0; i < count && !bad; i++) {
        PyObject *value = PyObject_GetAttr(PyTuple_GET_ITEM(items, i), name);
        bad = value == NULL || put(value, out_view.buf, i) < 0;
        Py_XDECREF(value);
    }
    Py_XDECREF(items);
    PyBuffer_Release(&out_view);
    if (bad) return NULL;
    Py_RETURN_NONE;
}

/* float_field(samples, name, out): each sample's field ``name`` as a double, NaN for None. */
static PyObject *float_field(PyObject *module, PyObject *args) {
    (void)module;
    return each_field(args, "d", put_double);
}

/* false_field(samples, name, out): whether each sample's field ``name`` is False (bool). */
static PyObject *false_field(PyObject *module, PyObject *args) {
    (void)module;
    return each_field(args, "?", put_is_false);
}

/* measurement(measurements, name, out): each mapping's value for ``name`` as a double, NaN
 * where it has none (dictionaries read directly; any other mapping through .get). */
static PyObject *measurement(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *mappings, *name, *out_object;
    if (!PyArg_ParseTuple(args, "O!UO", &PyList_Type, &mappings, &name, &out_object))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(mappings);
    Py_buffer out_view;
    if (take_buffer(out_object, &out_view, "d", 1, count, 1, "out") < 0) return NULL;
    double *out = out_view.buf;
    PyObject *items = PySequence_Tuple(mappings); /* (as now: a value's float() may run code) */
    int bad = items == NULL;
    for (Py_ssize_t i = 0; i < count && !bad; i++) {
        PyObject *mapping = PyTuple_GET_ITEM(items, i), *value;
        if (PyDict_CheckExact(mapping)) {
            value = PyDict_GetItemWithError(mapping, name); /* borrowed: held while read */
            Py_XINCREF(value);
        } else {
            value = PyObject_CallMethod(mapping, "get", "O", name);
            if (value == NULL) {
                bad = 1;
                continue;
            }
        }
        if (value == NULL) {
            bad = PyErr_Occurred() != NULL;
            out[i] = NAN;
        } else {
            bad = as_double(value, &out[i]) < 0;
            Py_DECREF(value);
        }
    }
    Py_XDECREF(items);
    PyBuffer_Release(&out_view);
    if (bad) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"samples_of_rows", samples_of_rows, METH_VARARGS,
     "samples_of_rows(cls, ids, access, time_s, period_s, received_s, directions): see "
     "xapp/e2/sample_rows.py"},
    {"group_codes", group_codes, METH_VARARGS,
     "group_codes(samples, codes): see xapp/estimators/columns.py"},
    {"float_field", float_field, METH_VARARGS,
     "float_field(samples, name, out): see xapp/estimators/columns.py"},
    {"false_field", false_field, METH_VARARGS,
     "false_field(samples, name, out): see xapp/estimators/columns.py"},
    {"measurement", measurement, METH_VARARGS,
     "measurement(measurements, name, out): see xapp/estimators/columns.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_samples", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__samples(void) {
    for (int i = 0; i < 11; i++) {
        field_names[i] = PyUnicode_InternFromString(FIELDS[i]);
        if (field_names[i] == NULL) return NULL;
    }
    access_name = PyUnicode_InternFromString("access");
    direction_name = PyUnicode_InternFromString("direction");
    if (access_name == NULL || direction_name == NULL) return NULL;
    PyObject *created = PyModule_Create(&definition);
    if (created != NULL &&
        PyModule_AddStringConstant(created, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
