/* The strict fast reader of E2SM-KPM indication messages (Format 1 and Format 3), in C.
 *
 * The compiled twin of kpm/fast_message.py: the same grammar read in the same order with the
 * same checks, so that it accepts exactly what the pure-Python reader accepts and returns equal
 * reports (tests/test_fast_message_core.py compares the two on generated messages, the shared
 * interop vectors and every single-bit flip). Read kpm/fast_message.py first: the comments on
 * why each check is there (X.691 clauses, canonical forms) live there, once.
 *
 * Convention: a function returning int gives 0 when it read its part, HAND_OVER when the bytes
 * are not a shape it can show conforms (the caller hands the message to the generic reader),
 * and FAILED when Python raised (memory). One returning PyObject* gives NULL for both, with an
 * exception set only when Python raised.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define HAND_OVER 1
#define FAILED -1
#define LABEL_OPTIONALS 21
#define NO_LABEL (1u << (LABEL_OPTIONALS - 1))
#define DIST_BIN_X (1u << (LABEL_OPTIONALS - 14))

#define TRY(call)                                                                             \
    do {                                                                                      \
        int status_ = (call);                                                                 \
        if (status_) return status_;                                                          \
    } while (0)

/* The report types of kpm.reports, handed over once by kpm/fast_message.py. */
static PyObject *record_type, *report_type, *problem_type;

/* ------------------------------------------------------------------------ the bit cursor */

typedef struct {
    const unsigned char *data;
    Py_ssize_t len;  /* octets */
    Py_ssize_t pos;  /* bits from the start */
    Py_ssize_t end;  /* len * 8 */
} Bits;

static int read_bits(Bits *b, int count, uint64_t *out) {
    Py_ssize_t stop = b->pos + count;
    if (stop > b->end) return HAND_OVER;
    uint64_t value = 0;
    Py_ssize_t at = b->pos;
    while (at < stop) {
        int offset = (int)(at & 7);
        int take = 8 - offset;
        if (take > stop - at) take = (int)(stop - at);
        unsigned piece = (b->data[at >> 3] >> (8 - offset - take)) & ((1u << take) - 1);
        value = (value << take) | piece;
        at += take;
    }
    b->pos = stop;
    *out = value;
    return 0;
}

static int bit(Bits *b, int *out) {
    uint64_t value;
    TRY(read_bits(b, 1, &value));
    *out = (int)value;
    return 0;
}

/* One bit that must be 0 (an extension marker, a choice of the root). */
static int zero_bit(Bits *b) {
    int value;
    TRY(bit(b, &value));
    return value ? HAND_OVER : 0;
}

static int align(Bits *b) {
    int offset = (int)(b->pos & 7);
    if (offset) {
        uint64_t padding;
        TRY(read_bits(b, 8 - offset, &padding));
        if (padding) return HAND_OVER;
    }
    return 0;
}

static int octets(Bits *b, Py_ssize_t count, const unsigned char **out) {
    TRY(align(b));
    Py_ssize_t start = b->pos >> 3;
    if (start + count > b->len) return HAND_OVER;
    b->pos += count << 3;
    *out = b->data + start;
    return 0;
}

static int octet(Bits *b, unsigned *out) {
    const unsigned char *at;
    TRY(octets(b, 1, &at));
    *out = *at;
    return 0;
}

static int length(Bits *b, Py_ssize_t *out) {
    unsigned first, second;
    TRY(octet(b, &first));
    if (first < 0x80) {
        *out = first;
        return 0;
    }
    if (first < 0xC0) {
        TRY(octet(b, &second));
        Py_ssize_t value = ((Py_ssize_t)(first & 0x3F) << 8) | second;
        if (value < 0x80) return HAND_OVER;
        *out = value;
        return 0;
    }
    return HAND_OVER;
}

static int bit_length(uint64_t value) {
    int n = 0;
    while (value) {
        n++;
        value >>= 1;
    }
    return n;
}

static int whole(Bits *b, uint64_t highest, uint64_t *out) {
    uint64_t value;
    if (highest == 0) {
        *out = 0;
        return 0;
    }
    uint64_t span = highest + 1;
    if (span <= 255) {
        TRY(read_bits(b, bit_length(span - 1), &value));
    } else if (span == 256) {
        unsigned one;
        TRY(octet(b, &one));
        value = one;
    } else if (span <= 65536) {
        TRY(align(b));
        TRY(read_bits(b, 16, &value));
    } else {
        int most = (bit_length(highest) + 7) / 8;
        uint64_t size_minus_one;
        TRY(read_bits(b, bit_length((uint64_t)(most - 1)), &size_minus_one));
        Py_ssize_t size = (Py_ssize_t)size_minus_one + 1;
        const unsigned char *raw;
        TRY(octets(b, size, &raw));
        if (size > 1 && raw[0] == 0) return HAND_OVER;
        if (size > 8) return HAND_OVER;
        value = 0;
        for (Py_ssize_t i = 0; i < size; i++) value = (value << 8) | raw[i];
    }
    if (value > highest) return HAND_OVER;
    *out = value;
    return 0;
}

static int count_of(Bits *b, uint64_t upper, Py_ssize_t *out) {
    uint64_t value;
    TRY(whole(b, upper - 1, &value));
    *out = (Py_ssize_t)value + 1;
    return 0;
}

static int done(Bits *b) {
    TRY(align(b));
    return b->pos == b->end ? 0 : HAND_OVER;
}

/* An open type's octets, fragments joined (X.691 §11.9.3.8); a new bytes object or NULL. */
static PyObject *open_type(Bits *b) {
    PyObject *joined = PyBytes_FromStringAndSize(NULL, 0);
    if (joined == NULL) return NULL;
    for (;;) {
        unsigned first;
        const unsigned char *part;
        Py_ssize_t size;
        if (octet(b, &first)) goto hand_over;
        if (first < 0xC0) {
            b->pos -= 8;
            if (length(b, &size) || octets(b, size, &part)) goto hand_over;
        } else {
            unsigned fragments = first - 0xC0;
            if (fragments < 1 || fragments > 4) goto hand_over;
            size = (Py_ssize_t)fragments << 14;
            if (octets(b, size, &part)) goto hand_over;
        }
        PyObject *piece = PyBytes_FromStringAndSize((const char *)part, size);
        if (piece == NULL) goto failed;
        PyBytes_ConcatAndDel(&joined, piece);
        if (joined == NULL) return NULL;
        if (first < 0xC0) break;
        if (first - 0xC0 < 4) {
            unsigned follow;
            if (octet(b, &follow)) goto hand_over;
            b->pos -= 8;
            if (follow >= 0xC0) goto hand_over;
        }
    }
    if (PyBytes_GET_SIZE(joined) == 0) goto hand_over;
    return joined;
hand_over:
failed:
    Py_XDECREF(joined);
    return NULL;
}

/* A REAL's contents in a canonical form both readers accept (see _real, kpm/reals.py). */
static int real(const unsigned char *raw, Py_ssize_t size, double *out) {
    if (size == 0) {
        *out = 0.0;
        return 0;
    }
    unsigned first = raw[0];
    if ((first == 0x40 || first == 0x41 || first == 0x42) && size == 1) {
        *out = NAN;
        return 0;
    }
    if ((first & 0xBF) != 0x80 && (first & 0xBF) != 0x81) return HAND_OVER;
    Py_ssize_t exponent_size = (first & 0x01) ? 2 : 1;
    if (size < 2 + exponent_size) return HAND_OVER;
    long exponent = (signed char)raw[1];
    if (exponent_size == 2) exponent = exponent * 256 + raw[2];
    Py_ssize_t mantissa_size = size - 1 - exponent_size;
    if (mantissa_size > 7) return HAND_OVER; /* canonical or not, more than 53 bits */
    uint64_t mantissa = 0;
    for (Py_ssize_t i = 1 + exponent_size; i < size; i++) mantissa = (mantissa << 8) | raw[i];
    /* kpm/reals.py: the fewest octets as an unsigned number, or as a signed one. */
    const int bits = bit_length(mantissa);
    if ((mantissa & 1) == 0 || (mantissa_size != (bits + 7) / 8 && mantissa_size != bits / 8 + 1))
        return HAND_OVER;
    if (exponent_size == 2 && exponent >= -128 && exponent <= 127) return HAND_OVER;
    /* kpm/reals.py (LEAST_EXACT_EXPONENT): below 2^-1074 no double holds M · 2^E exactly */
    if (exponent < -1074) return HAND_OVER;
    if (bit_length(mantissa) > 53) return HAND_OVER;
    double value = ldexp((double)mantissa, (int)exponent);
    if (isinf(value)) return HAND_OVER; /* math.ldexp raises OverflowError there */
    *out = (first & 0x40) ? -value : value;
    return 0;
}

/* ------------------------------------------------------------------------------ the reader */

/* A measInfoList read before in the message: its octets (whole ones from an aligned start,
 * then ``tail_bits`` bits) and what they said. The UEs of a Format 3 message each repeat the
 * list; where each names its own CQI bin, consecutive UEs differ but a dozen lists recur, and
 * reading each UE's afresh made eight names and labels a UE. */
#define INFO_SEEN 16
typedef struct {
    const unsigned char *octets;
    Py_ssize_t size;
    int tail_bits;
    uint64_t tail_value;
    PyObject *names;  /* tuple, owned */
    PyObject *labels; /* tuple, owned */
} InfoSeen;

typedef struct {
    Bits bits;
    PyObject *subscribed; /* tuple of str (borrowed) */
    PyObject *problems;   /* list */
    /* Format 3: the last INFO_SEEN distinct measInfoLists read and what they said, the one
     * read or found last at ``info_last`` (where the next is looked for first). */
    InfoSeen info[INFO_SEEN];
    int info_count, info_last, info_next; /* (info_next: the place kept over next, in turn) */
    struct Columns *columns; /* not NULL: Format 3 read into columns (read_columns) */
} Reader;

/* A Format 3 message read as columns (read_columns): every UE's measurements the same names,
 * one complete period each, nothing to complain of; anything else is read as records. A
 * measurement whose labels differ between UEs (a UE's CQI bin) keeps each UE's. */
typedef struct Columns {
    PyObject *names, *labels; /* the first UE's (owned) */
    PyObject **varying;       /* per measurement: NULL, or a list of each UE's labels */
    Py_ssize_t measured;
    PyObject *keys;           /* list: each UE's key tuple */
    double *values;           /* UEs × measurements, NaN for noValue */
    Py_ssize_t used, size;    /* doubles */
} Columns;

static void reader_init(Reader *r, const unsigned char *data, Py_ssize_t size, PyObject *subscribed) {
    memset(r, 0, sizeof(*r));
    r->bits.data = data;
    r->bits.len = size;
    r->bits.end = size * 8;
    r->subscribed = subscribed;
}

static void reader_clear(Reader *r) {
    Py_CLEAR(r->problems);
    for (int i = 0; i < r->info_count; i++) {
        Py_CLEAR(r->info[i].names);
        Py_CLEAR(r->info[i].labels);
    }
    r->info_count = 0;
}

static int problem(Reader *r, const char *cause, PyObject *message) {
    if (message == NULL) return FAILED;
    if (r->problems == NULL && (r->problems = PyList_New(0)) == NULL) {
        Py_DECREF(message);
        return FAILED;
    }
    PyObject *found = PyObject_CallFunction(problem_type, "sO", cause, message);
    Py_DECREF(message);
    if (found == NULL) return FAILED;
    int status = PyList_Append(r->problems, found);
    Py_DECREF(found);
    return status ? FAILED : 0;
}

static PyObject *problems_tuple(Reader *r) {
    return r->problems ? PyList_AsTuple(r->problems) : PyTuple_New(0);
}

/* The status a NULL from a PyObject* function stands for. */
static int status_of_null(void) { return PyErr_Occurred() ? FAILED : HAND_OVER; }

static const char PRINTABLE[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 '()+,-./:=?";
/* PRINTABLE as a table by octet (filled at import): a name's every octet is looked up, and
 * a Format 3 message whose UEs' names vary (each its own CQI bin) reads thousands a message. */
static unsigned char printable[256];

static PyObject *meas_type(Reader *r) {
    Bits *b = &r->bits;
    int is_id;
    uint64_t value;
    if (zero_bit(b) || bit(b, &is_id)) return NULL;
    if (is_id) {
        if (zero_bit(b) || whole(b, 65535, &value)) return NULL;
        return PyUnicode_FromFormat("id:%llu", (unsigned long long)(value + 1));
    }
    const unsigned char *raw;
    if (zero_bit(b) || whole(b, 149, &value) || octets(b, (Py_ssize_t)value + 1, &raw)) return NULL;
    for (uint64_t i = 0; i <= value; i++) {
        if (!printable[raw[i]]) return NULL;
    }
    return PyUnicode_DecodeASCII((const char *)raw, (Py_ssize_t)value + 1, NULL);
}

static PyObject *label_info(Reader *r) {
    Bits *b = &r->bits;
    Py_ssize_t count;
    if (length(b, &count) || count == 0) return NULL;
    PyObject *found = PyDict_New();
    if (found == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t present, bin;
        if (zero_bit(b) || zero_bit(b) || read_bits(b, LABEL_OPTIONALS, &present)) goto hand_over;
        if (present == NO_LABEL) {
            if (zero_bit(b)) goto hand_over;
        } else if (present == DIST_BIN_X) {
            if (zero_bit(b) || whole(b, 65534, &bin)) goto hand_over;
            if (PyDict_GET_SIZE(found) == 0) {
                PyObject *value = PyLong_FromUnsignedLongLong(bin + 1);
                if (value == NULL || PyDict_SetItemString(found, "distBinX", value)) {
                    Py_XDECREF(value);
                    goto hand_over;
                }
                Py_DECREF(value);
            }
        } else {
            goto hand_over;
        }
    }
    return found;
hand_over:
    Py_DECREF(found);
    return NULL;
}

/* The measInfoList: names and labels (new references to the reader's cached tuples). */
static int info_list(Reader *r, PyObject **names, PyObject **labels) {
    Bits *b = &r->bits;
    TRY(align(b));
    Py_ssize_t start = b->pos;
    for (int tried = 0; tried < r->info_count; tried++) {
        const int at = (r->info_last + tried) % r->info_count;
        const InfoSeen *seen = &r->info[at];
        Py_ssize_t whole_end = start + seen->size * 8;
        if ((start >> 3) + seen->size <= b->len &&
            memcmp(b->data + (start >> 3), seen->octets, (size_t)seen->size) == 0 &&
            whole_end + seen->tail_bits <= b->end) {
            b->pos = whole_end;
            uint64_t tail = 0;
            if (seen->tail_bits) TRY(read_bits(b, seen->tail_bits, &tail));
            if (!seen->tail_bits || tail == seen->tail_value) {
                r->info_last = at;
                *names = Py_NewRef(seen->names);
                *labels = Py_NewRef(seen->labels);
                return 0;
            }
            b->pos = start;
        }
    }
    Py_ssize_t count;
    TRY(count_of(b, 65535, &count));
    PyObject *found_names = PyTuple_New(count);
    PyObject *found_labels = PyTuple_New(count);
    if (found_names == NULL || found_labels == NULL) goto failed;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (zero_bit(b)) goto hand_over;
        PyObject *name = meas_type(r);
        if (name == NULL) goto null;
        PyTuple_SET_ITEM(found_names, i, name);
        PyObject *label = label_info(r);
        if (label == NULL) goto null;
        PyTuple_SET_ITEM(found_labels, i, label);
    }
    Py_ssize_t end = b->pos;
    /* kept in a free place, else over the places in turn (the oldest kept first) */
    int at;
    if (r->info_count < INFO_SEEN) {
        at = r->info_count++;
    } else {
        at = r->info_next;
        r->info_next = (r->info_next + 1) % INFO_SEEN;
    }
    InfoSeen *seen = &r->info[at];
    seen->octets = b->data + (start >> 3);
    seen->size = (end >> 3) - (start >> 3);
    seen->tail_bits = (int)(end & 7);
    seen->tail_value = seen->tail_bits ? (b->data[end >> 3] >> (8 - seen->tail_bits)) : 0;
    Py_XSETREF(seen->names, found_names);
    Py_XSETREF(seen->labels, found_labels);
    r->info_last = at;
    *names = Py_NewRef(found_names);
    *labels = Py_NewRef(found_labels);
    return 0;
null:
    Py_DECREF(found_names);
    Py_DECREF(found_labels);
    return status_of_null();
hand_over:
    Py_DECREF(found_names);
    Py_DECREF(found_labels);
    return HAND_OVER;
failed:
    Py_XDECREF(found_names);
    Py_XDECREF(found_labels);
    return FAILED;
}

/* A MeasurementDataItem: its values (a list; None for noValue) and whether incomplete. */
static int data_item(Reader *r, PyObject **values, int *incomplete) {
    Bits *b = &r->bits;
    Py_ssize_t count;
    TRY(zero_bit(b));
    TRY(bit(b, incomplete));
    TRY(length(b, &count));
    if (count == 0) return HAND_OVER;
    PyObject *found = PyList_New(count);
    if (found == NULL) return FAILED;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t kind, number;
        PyObject *value;
        if (zero_bit(b) || read_bits(b, 2, &kind)) goto hand_over;
        if (kind == 0) {
            if (whole(b, 4294967295ULL, &number)) goto hand_over;
            value = PyFloat_FromDouble((double)number);
        } else if (kind == 1) {
            Py_ssize_t size;
            const unsigned char *raw;
            double real_value;
            if (length(b, &size) || octets(b, size, &raw) || real(raw, size, &real_value))
                goto hand_over;
            value = PyFloat_FromDouble(real_value);
        } else if (kind == 2) {
            value = Py_NewRef(Py_None);
        } else {
            goto hand_over;
        }
        if (value == NULL) {
            Py_DECREF(found);
            return FAILED;
        }
        PyList_SET_ITEM(found, i, value);
    }
    if (*incomplete && zero_bit(b)) goto hand_over;
    *values = found;
    return 0;
hand_over:
    Py_DECREF(found);
    return HAND_OVER;
}

/* A MeasurementRecord with these fields: a named tuple, made as tuple.__new__ makes one (the
 * type's own allocation, then its five items). */
static PyObject *new_record(PyObject *name, PyObject *value, PyObject *period_index,
                            PyObject *keys, PyObject *labels) {
    PyTypeObject *type = (PyTypeObject *)record_type;
    PyObject *record = type->tp_alloc(type, 5);
    if (record == NULL) return NULL;
    PyObject *given[5] = {name, value, period_index, keys, labels};
    for (int i = 0; i < 5; i++) PyTuple_SET_ITEM(record, i, Py_NewRef(given[i]));
    return record;
}

/* One UE's measurements into the columns: HAND_OVER (read the message as records) unless
 * they are one complete period of the first UE's names. */
static int columns_add(Columns *c, PyObject *names, PyObject *labels, Py_ssize_t periods,
                       PyObject **values, const int *incomplete) {
    Py_ssize_t measured = PyTuple_GET_SIZE(names);
    if (periods != 1 || incomplete[0] || measured == 0 ||
        PyList_GET_SIZE(values[0]) != measured)
        return HAND_OVER;
    Py_ssize_t ues = PyList_GET_SIZE(c->keys); /* read before this one */
    if (c->names == NULL) {
        c->varying = PyMem_Calloc((size_t)measured, sizeof(PyObject *));
        if (c->varying == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        c->names = Py_NewRef(names);
        c->labels = Py_NewRef(labels);
        c->measured = measured;
    } else if (measured != c->measured) {
        return HAND_OVER;
    } else if (names != c->names) {
        int same = PyObject_RichCompareBool(names, c->names, Py_EQ);
        if (same < 0) return FAILED;
        if (!same) return HAND_OVER;
    }
    /* (labels the same object as the first UE's: the same bytes, nothing varies) */
    for (Py_ssize_t m = 0; labels != c->labels && m < measured; m++) {
        PyObject *label = PyTuple_GET_ITEM(labels, m), *first = PyTuple_GET_ITEM(c->labels, m);
        if (c->varying[m] == NULL && label != first) {
            int same = PyObject_RichCompareBool(label, first, Py_EQ);
            if (same < 0) return FAILED;
            if (same) continue;
            /* varies from this UE on: the UEs before had the first UE's */
            if ((c->varying[m] = PyList_New(ues)) == NULL) return FAILED;
            for (Py_ssize_t u = 0; u < ues; u++)
                PyList_SET_ITEM(c->varying[m], u, Py_NewRef(first));
        }
    }
    for (Py_ssize_t m = 0; m < measured; m++) {
        if (c->varying[m] != NULL && PyList_Append(c->varying[m], PyTuple_GET_ITEM(labels, m)))
            return FAILED;
    }
    if (c->used + measured > c->size) {
        Py_ssize_t size = c->size ? 2 * c->size : 64 * measured;
        while (size < c->used + measured) size *= 2;
        double *grown = PyMem_Realloc(c->values, (size_t)size * sizeof(double));
        if (grown == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        c->values = grown;
        c->size = size;
    }
    for (Py_ssize_t m = 0; m < measured; m++) {
        PyObject *value = PyList_GET_ITEM(values[0], m);
        const double number = value == Py_None ? NAN : PyFloat_AS_DOUBLE(value);
        /* NaN stands for noValue here: a REAL NaN sent as a value goes as a record, and is
         * refused there (out of range) */
        if (value != Py_None && number != number) return HAND_OVER;
        c->values[c->used++] = number;
    }
    return 0;
}

/* An E2SM-KPM-IndicationMessage-Format1's granularity (new ref: int or None) and records
 * (appended to ``records``), each with these UE keys. */
static int format1(Reader *r, PyObject *keys, PyObject **granularity, PyObject *records) {
    Bits *b = &r->bits;
    int has_info, has_granularity, status = 0;
    Py_ssize_t periods;
    TRY(zero_bit(b));
    TRY(bit(b, &has_info));
    TRY(bit(b, &has_granularity));
    TRY(count_of(b, 65535, &periods));
    PyObject **values = PyMem_Calloc((size_t)periods, sizeof(PyObject *));
    int *incomplete = PyMem_Calloc((size_t)periods, sizeof(int));
    PyObject *names = NULL, *labels = NULL;
    *granularity = NULL;
    if (values == NULL || incomplete == NULL) {
        PyErr_NoMemory();
        status = FAILED;
        goto out;
    }
    for (Py_ssize_t i = 0; i < periods; i++) {
        if ((status = data_item(r, &values[i], &incomplete[i]))) goto out;
    }
    if (has_info) {
        if ((status = info_list(r, &names, &labels))) goto out;
    } else if (PyTuple_GET_SIZE(r->subscribed) > 0) {
        names = Py_NewRef(r->subscribed);
        labels = PyTuple_New(PyTuple_GET_SIZE(names));
        if (labels == NULL) {
            status = FAILED;
            goto out;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
            PyObject *empty = PyDict_New();
            if (empty == NULL) {
                status = FAILED;
                goto out;
            }
            PyTuple_SET_ITEM(labels, i, empty);
        }
    } else {
        if ((status = problem(r, "no-meas-info",
                              PyUnicode_FromString("Format 1 without measInfoList"))))
            goto out;
        names = PyTuple_New(0);
        labels = PyTuple_New(0);
        if (names == NULL || labels == NULL) {
            status = FAILED;
            goto out;
        }
    }
    if (has_granularity) {
        uint64_t period;
        if ((status = whole(b, 4294967294ULL, &period))) goto out;
        *granularity = PyLong_FromUnsignedLongLong(period + 1);
    } else {
        *granularity = Py_NewRef(Py_None);
    }
    if (*granularity == NULL) {
        status = FAILED;
        goto out;
    }
    Py_ssize_t measured = PyTuple_GET_SIZE(names);
    if (r->columns != NULL) {
        status = columns_add(r->columns, names, labels, periods, values, incomplete);
        goto out;
    }
    if (measured == 0) goto out;
    for (Py_ssize_t index = 0; index < periods; index++) {
        Py_ssize_t size = PyList_GET_SIZE(values[index]);
        if (size != measured) {
            status = problem(r, "record-length",
                             PyUnicode_FromFormat("period %zd: measRecord has %zd values for %zd "
                                                  "measurements; period skipped",
                                                  index, size, measured));
            if (status) goto out;
            continue;
        }
        if (incomplete[index]) {
            status = problem(
                r, "record-incomplete",
                PyUnicode_FromFormat("period %zd is flagged incomplete; skipped", index));
            if (status) goto out;
            continue;
        }
        PyObject *period_index = PyLong_FromSsize_t(index);
        if (period_index == NULL) {
            status = FAILED;
            goto out;
        }
        for (Py_ssize_t m = 0; m < measured; m++) {
            PyObject *record = new_record(PyTuple_GET_ITEM(names, m),
                                          PyList_GET_ITEM(values[index], m), period_index, keys,
                                          PyTuple_GET_ITEM(labels, m));
            if (record == NULL || PyList_Append(records, record)) {
                Py_XDECREF(record);
                Py_DECREF(period_index);
                status = FAILED;
                goto out;
            }
            Py_DECREF(record);
        }
        Py_DECREF(period_index);
    }
out:
    if (values != NULL) {
        for (Py_ssize_t i = 0; i < periods; i++) Py_XDECREF(values[i]);
        PyMem_Free(values);
    }
    PyMem_Free(incomplete);
    Py_XDECREF(names);
    Py_XDECREF(labels);
    if (status) Py_CLEAR(*granularity);
    return status;
}

static const char HEX_DIGITS[] = "0123456789abcdef";

/* ``prefix`` then the octets in lowercase hexadecimal, each followed by ``between`` (none
 * after the last; 0: nothing between), as a str appended to ``keys``. By hand: snprintf's
 * "%02x" for each octet was a fifth of a 1,000-UE message's reading. */
static int hex_key_into(PyObject *keys, const char *prefix, const unsigned char *octets,
                        int count, char between) {
    char text[64];
    size_t n = strlen(prefix);
    memcpy(text, prefix, n);
    for (int i = 0; i < count; i++) {
        if (i && between) text[n++] = between;
        text[n++] = HEX_DIGITS[octets[i] >> 4];
        text[n++] = HEX_DIGITS[octets[i] & 15];
    }
    PyObject *key = PyUnicode_FromStringAndSize(text, (Py_ssize_t)n);
    if (key == NULL || PyList_Append(keys, key)) {
        Py_XDECREF(key);
        return -1;
    }
    Py_DECREF(key);
    return 0;
}

static PyObject *ran_keys_into(PyObject *keys, const unsigned char *ran) {
    if (hex_key_into(keys, "ran:", ran, 8, 0)) return NULL;
    if (ran[0] == 0 && ran[1] == 0 && hex_key_into(keys, "mac:", ran + 2, 6, ':')) return NULL;
    return keys;
}

/* "prefix:identifier" (the identifier in decimal) as a str. */
static PyObject *numbered_key(const char *prefix, unsigned long long identifier) {
    char digits[24];
    int d = (int)sizeof digits;
    do {
        digits[--d] = (char)('0' + identifier % 10);
        identifier /= 10;
    } while (identifier);
    char text[64];
    size_t n = strlen(prefix);
    memcpy(text, prefix, n);
    text[n++] = ':';
    memcpy(text + n, digits + d, sizeof digits - (size_t)d);
    n += sizeof digits - (size_t)d;
    return PyUnicode_FromStringAndSize(text, (Py_ssize_t)n);
}

/* A UEID's keys as kpm.ueid.ue_keys gives them (a new tuple), for the kinds read here. */
static PyObject *ueid_keys(Reader *r) {
    Bits *b = &r->bits;
    uint64_t kind, identifier, present, ignored;
    const unsigned char *ran = NULL, *plmn;
    const char *prefix;
    if (zero_bit(b) || read_bits(b, 3, &kind)) return NULL;
    if (kind == 1 || kind == 2) {
        int has_ran;
        if (zero_bit(b) || bit(b, &has_ran) || whole(b, 4294967295ULL, &identifier)) return NULL;
        if (has_ran && octets(b, 8, &ran)) return NULL;
        prefix = kind == 1 ? "gnb-du" : "gnb-cu-up";
    } else if (kind == 0) {
        if (zero_bit(b) || read_bits(b, 5, &present) || (present & 0x1B)) return NULL;
        if (whole(b, 1099511627775ULL, &identifier)) return NULL;
        /* the GUAMI: read for its place, not needed for the keys */
        if (zero_bit(b) || octets(b, 3, &plmn) || read_bits(b, 8, &ignored) ||
            read_bits(b, 10, &ignored) || read_bits(b, 6, &ignored))
            return NULL;
        if ((present & 0x04) && octets(b, 8, &ran)) return NULL;
        prefix = "gnb";
    } else {
        return NULL;
    }
    PyObject *keys = PyList_New(0);
    if (keys == NULL) return NULL;
    PyObject *primary = numbered_key(prefix, (unsigned long long)identifier);
    if (primary == NULL || PyList_Append(keys, primary)) {
        Py_XDECREF(primary);
        Py_DECREF(keys);
        return NULL;
    }
    Py_DECREF(primary);
    if (ran != NULL && ran_keys_into(keys, ran) == NULL) {
        Py_DECREF(keys);
        return NULL;
    }
    PyObject *found = PyList_AsTuple(keys);
    Py_DECREF(keys);
    return found;
}

static PyObject *report(int message_format, PyObject *granularity, PyObject *records, Reader *r) {
    PyObject *rows = PyList_AsTuple(records);
    PyObject *problems = problems_tuple(r);
    PyObject *found = NULL;
    if (rows != NULL && problems != NULL) {
        found = PyObject_CallFunction(report_type, "iOOO", message_format, granularity, rows,
                                      problems);
    }
    Py_XDECREF(rows);
    Py_XDECREF(problems);
    return found;
}

static PyObject *format3(Reader *r) {
    Bits *b = &r->bits;
    Py_ssize_t ues;
    if (zero_bit(b) || count_of(b, 65535, &ues)) return NULL;
    PyObject *records = PyList_New(0);
    PyObject *granularity = Py_NewRef(Py_None);
    PyObject *found = NULL;
    if (records == NULL) goto out;
    for (Py_ssize_t i = 0; i < ues; i++) {
        if (zero_bit(b)) goto out;
        PyObject *keys = ueid_keys(r);
        if (keys == NULL) goto out;
        PyObject *period = NULL;
        int status = format1(r, keys, &period, records);
        if (!status && r->columns != NULL && PyList_Append(r->columns->keys, keys)) {
            Py_DECREF(period);
            status = FAILED;
        }
        Py_DECREF(keys);
        if (status) goto out;
        if (!PyObject_IsTrue(granularity)) {
            Py_SETREF(granularity, period);
        } else {
            Py_DECREF(period);
        }
    }
    if (r->columns != NULL) {
        /* nothing complained of (a problem is read as records), some UE read */
        if (r->problems == NULL && r->columns->names != NULL) found = Py_NewRef(granularity);
    } else {
        found = report(3, granularity, records, r);
    }
out:
    Py_XDECREF(records);
    Py_DECREF(granularity);
    return found;
}

static PyObject *message(Reader *r, int format3_in_root) {
    Bits *b = &r->bits;
    int chosen_bit;
    uint64_t chosen;
    if (zero_bit(b)) return NULL;
    if (format3_in_root) {
        if (zero_bit(b) || read_bits(b, 2, &chosen)) return NULL;
    } else {
        if (bit(b, &chosen_bit)) return NULL;
        if (chosen_bit == 0) {
            if (read_bits(b, 1, &chosen)) return NULL;
        } else {
            uint64_t addition;
            if (zero_bit(b) || read_bits(b, 6, &addition) || addition != 0) return NULL;
            PyObject *content = open_type(b);
            if (content == NULL) return NULL;
            if (done(b)) {
                Py_DECREF(content);
                return NULL;
            }
            Reader inner;
            reader_init(&inner, (const unsigned char *)PyBytes_AS_STRING(content),
                        PyBytes_GET_SIZE(content), r->subscribed);
            inner.columns = r->columns;
            PyObject *found = format3(&inner);
            if (found != NULL && done(&inner.bits)) Py_CLEAR(found);
            reader_clear(&inner);
            Py_DECREF(content);
            return found;
        }
    }
    PyObject *found = NULL;
    if (chosen == 0 && r->columns != NULL) {
        return NULL; /* Format 1: records */
    } else if (chosen == 0) {
        PyObject *records = PyList_New(0);
        PyObject *granularity = NULL;
        PyObject *no_keys = PyTuple_New(0);
        if (records != NULL && no_keys != NULL &&
            format1(r, no_keys, &granularity, records) == 0) {
            found = report(1, granularity, records, r);
        }
        Py_XDECREF(records);
        Py_XDECREF(granularity);
        Py_XDECREF(no_keys);
    } else if (chosen == 2) {
        found = format3(r);
    } else {
        return NULL;
    }
    if (found != NULL && done(b)) Py_CLEAR(found);
    return found;
}

/* ------------------------------------------------------------------------------ the module */

static PyObject *read_message(PyObject *module, PyObject *args) {
    Py_buffer data;
    int format3_in_root;
    PyObject *subscribed;
    if (!PyArg_ParseTuple(args, "y*pO!:read_message", &data, &format3_in_root, &PyTuple_Type,
                          &subscribed))
        return NULL;
    if (record_type == NULL) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    Reader r;
    reader_init(&r, (const unsigned char *)data.buf, data.len, subscribed);
    PyObject *found = data.len ? message(&r, format3_in_root) : NULL;
    reader_clear(&r);
    PyBuffer_Release(&data);
    if (found == NULL && !PyErr_Occurred()) Py_RETURN_NONE; /* hand over */
    return found;
}

static void columns_clear(Columns *c) {
    if (c->varying != NULL) {
        for (Py_ssize_t m = 0; m < c->measured; m++) Py_XDECREF(c->varying[m]);
        PyMem_Free(c->varying);
        c->varying = NULL;
    }
    Py_CLEAR(c->names);
    Py_CLEAR(c->labels);
    Py_CLEAR(c->keys);
    PyMem_Free(c->values);
    c->values = NULL;
}

/* {measurement: tuple of each UE's labels} for the measurements whose labels vary. */
static PyObject *varying_dict(Columns *c) {
    PyObject *found = PyDict_New();
    for (Py_ssize_t m = 0; found != NULL && m < c->measured; m++) {
        if (c->varying[m] == NULL) continue;
        PyObject *index = PyLong_FromSsize_t(m);
        PyObject *each = PyList_AsTuple(c->varying[m]);
        if (index == NULL || each == NULL || PyDict_SetItem(found, index, each)) Py_CLEAR(found);
        Py_XDECREF(index);
        Py_XDECREF(each);
    }
    return found;
}

/* read_message for a Format 3 message whose UEs all report the same measurements, one period:
 * (granularity, names, the first UE's labels, UE key tuples, values as UEs × measurements
 * doubles with NaN for noValue, {measurement: each UE's labels} where they vary), or None
 * (read it with read_message). */
static PyObject *read_columns(PyObject *module, PyObject *args) {
    Py_buffer data;
    int format3_in_root;
    PyObject *subscribed;
    if (!PyArg_ParseTuple(args, "y*pO!:read_columns", &data, &format3_in_root, &PyTuple_Type,
                          &subscribed))
        return NULL;
    Columns columns = {0};
    columns.keys = PyList_New(0);
    if (columns.keys == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    Reader r;
    reader_init(&r, (const unsigned char *)data.buf, data.len, subscribed);
    r.columns = &columns;
    PyObject *granularity = data.len ? message(&r, format3_in_root) : NULL;
    reader_clear(&r);
    PyBuffer_Release(&data);
    PyObject *found = NULL;
    if (granularity != NULL) {
        PyObject *keys = PyList_AsTuple(columns.keys);
        PyObject *values = PyBytes_FromStringAndSize((const char *)columns.values,
                                                     columns.used * (Py_ssize_t)sizeof(double));
        PyObject *varying = varying_dict(&columns);
        if (keys != NULL && values != NULL && varying != NULL)
            found = PyTuple_Pack(6, granularity, columns.names, columns.labels, keys, values,
                                 varying);
        Py_XDECREF(keys);
        Py_XDECREF(values);
        Py_XDECREF(varying);
        Py_DECREF(granularity);
    }
    columns_clear(&columns);
    if (found == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return found;
}

static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *record, *report_cls, *problem_cls;
    if (!PyArg_ParseTuple(args, "OOO:configure", &record, &report_cls, &problem_cls)) return NULL;
    if (!PyType_Check(record) || !PyType_IsSubtype((PyTypeObject *)record, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the record type must be a named tuple of five fields");
        return NULL;
    }
    Py_XSETREF(record_type, Py_NewRef(record));
    Py_XSETREF(report_type, Py_NewRef(report_cls));
    Py_XSETREF(problem_type, Py_NewRef(problem_cls));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"read_message", read_message, METH_VARARGS,
     "read_message(data, format3_in_root, subscribed_names) -> IndicationReport | None"},
    {"read_columns", read_columns, METH_VARARGS,
     "read_columns(data, format3_in_root, subscribed_names) -> (granularity, names, labels, "
     "UE keys, values, varying labels) | None"},
    {"configure", configure, METH_VARARGS,
     "configure(MeasurementRecord, IndicationReport, ReportProblem): the types to build"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "kpm._fast_message",
    "The compiled twin of kpm.fast_message's reader.", -1, methods, NULL, NULL, NULL, NULL,
};

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 "unknown" /* built without setup.py */
#endif

PyMODINIT_FUNC PyInit__fast_message(void) {
    for (const char *c = PRINTABLE; *c; c++) printable[(unsigned char)*c] = 1;
    PyObject *module = PyModule_Create(&module_definition);
    if (module != NULL && PyModule_AddStringConstant(module, "SOURCE_SHA256", SOURCE_SHA256)) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
