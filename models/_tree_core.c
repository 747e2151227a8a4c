/* The shipped capacity models' tree ensembles scored in C: the compiled twin of onnxruntime's
 * TreeEnsembleRegressor for the one shape models/tree_scorer.py accepts (every node "x <= t"
 * or a leaf, at most 32 leaves a tree, one target, a sum with no transform). onnxruntime stays
 * the reference and the fallback; tests/test_tree_core.py holds the two to the same bits.
 *
 * Why: a fleet's step predicts every downlink path with nine ensembles of 51 to 226 trees, and
 * walking a tree is a chain of dependent loads and branches the predictor cannot learn, about
 * 10-27 ns a tree and row in onnxruntime, a fifth of the xApp's work at 1,000 CPEs and 100 ms.
 *
 * How: QuickScorer's reading of a tree (Lucchese et al., SIGIR 2015). Number a tree's leaves
 * from left ("x <= t" true) to right. The leaf a row reaches is the leftmost one not under the
 * true side of a node whose test is false for the row: each false node takes away the leaves
 * on its true side, and the leftmost leaf left is the exit (every node on the way to it is
 * true where it goes left and false where it goes right, and no false node elsewhere covers
 * it). So a row starts with every leaf of every tree in play and, feature by feature, takes
 * away the true side of every node whose threshold is below its value: with each feature's
 * nodes sorted by threshold, a scan that stops at the first threshold at or above the value,
 * with no dependent loads at all. Eight rows go through at once, one vector lane each, the
 * scan running to the largest of their eight values. A missing value (NaN) goes to the node's
 * false side unless the node says missing values go true (onnxruntime's rule); those nodes are
 * listed apart per feature.
 *
 * The sum: onnxruntime adds a row's leaf values in float32 in tree order and the base value
 * last; so does this.
 *
 * Arrays come in through the buffer protocol, C-contiguous, as tree_scorer.py lays them out;
 * every index in them is checked here before any row is scored. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LANES 16
#define MAX_LEAVES 32 /* a tree's leaves as the bits of one uint32 */
#define MAX_FEATURES 256

typedef struct {
    /* each feature's nodes, by threshold: [starts[f], starts[f + 1]) */
    const float *thresholds;
    const int32_t *trees;
    const uint32_t *keeps; /* the leaves a false test keeps: all but its true side's */
    const int32_t *starts;
    /* each feature's nodes whose missing value goes false: [nan_starts[f], nan_starts[f + 1]) */
    const int32_t *nan_trees;
    const uint32_t *nan_keeps;
    const int32_t *nan_starts;
    const float *leaf_values; /* (trees, MAX_LEAVES), left to right */
    int tree_count, features;
    float base;
} Ensemble;

/* ``SCORE_LANES(name, lanes, attributes)`` defines ``name``: rows [first, first + count) of
 * x (rows of ``features`` floats), count <= lanes, scored into out, one row a vector lane;
 * ``scratch`` holds tree_count vectors of ``lanes`` uint32, aligned to 64 bytes. Defined twice
 * below: eight lanes (AVX2's 256 bits, or the baseline's pairs of 128) and sixteen where the
 * CPU has AVX-512 (a quarter less time again on the shipped models; sixteen lanes built for
 * AVX2 took three times as long as eight). Each lane's sum is the same whatever the width.
 *
 * Inside: the feature pointers read once (the module is built without strict aliasing, so
 * every store to the leaves would otherwise read them again); ``every_lane(v)`` is a vector
 * or'ed with a scalar, which the compiler broadcasts in one instruction (an inline function
 * building the vector lane by lane is lowered for the baseline before GCC 12 inlines it into a
 * wider clone: seven instructions). */
#define SCORE_LANES(name, lanes, attributes)                                                   \
    typedef float name##_floats __attribute__((vector_size(4 * (lanes))));                     \
    typedef uint32_t name##_leaves __attribute__((vector_size(4 * (lanes))));                  \
    attributes static void name(const Ensemble *e, const float *x, Py_ssize_t first,          \
                                int count, float *out, void *scratch) {                        \
        name##_leaves *leaves = scratch;                                                       \
        const float *thresholds = e->thresholds;                                               \
        const int32_t *trees = e->trees, *starts = e->starts;                                  \
        const int32_t *nan_trees = e->nan_trees, *nan_starts = e->nan_starts;                  \
        const uint32_t *keeps = e->keeps, *nan_keeps = e->nan_keeps;                           \
        const int features = e->features, tree_count = e->tree_count;                          \
        const name##_leaves none = {0};                                                        \
        for (int t = 0; t < tree_count; t++) leaves[t] = none | ~0u;                           \
        for (int f = 0; f < features; f++) {                                                   \
            name##_floats values = {0};                                                        \
            for (int i = 0; i < count; i++) values[i] = x[(first + i) * features + f];         \
            /* the largest value (a NaN is none: it is no threshold's "above") */              \
            float largest = -__builtin_inff();                                                 \
            for (int i = 0; i < count; i++) largest = values[i] > largest ? values[i] : largest; \
            const int end = starts[f + 1];                                                     \
            for (int k = starts[f]; k < end && thresholds[k] < largest; k++) {                 \
                const name##_leaves falls = (name##_leaves)(values > thresholds[k]);           \
                leaves[trees[k]] &= (none | keeps[k]) | ~falls;                                \
            }                                                                                  \
            const name##_leaves missing = (name##_leaves)(values != values);                   \
            int any_missing = 0;                                                               \
            for (int i = 0; i < (lanes); i++) any_missing |= missing[i] != 0;                  \
            if (any_missing) {                                                                 \
                const int nan_end = nan_starts[f + 1];                                         \
                for (int k = nan_starts[f]; k < nan_end; k++)                                  \
                    leaves[nan_trees[k]] &= (none | nan_keeps[k]) | ~missing;                  \
            }                                                                                  \
        }                                                                                      \
        float sums[lanes] = {0};                                                               \
        for (int t = 0; t < tree_count; t++) {                                                 \
            const float *values = e->leaf_values + (size_t)t * MAX_LEAVES;                     \
            /* (the top bit or'ed in: a leaf index even for tables that are not a tree's) */   \
            const name##_leaves exits = leaves[t] | 0x80000000u;                               \
            for (int i = 0; i < (lanes); i++) sums[i] += values[__builtin_ctz(exits[i])];      \
        }                                                                                      \
        for (int i = 0; i < count; i++) out[first + i] = sums[i] + e->base;                    \
    }

typedef void (*Scorer)(const Ensemble *, const float *, Py_ssize_t, int, float *, void *);

/* glibc on x86-64 only: the loader's choice needs its ifunc, and the CPU check GCC's. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && \
    (defined(__clang__) || __GNUC__ >= 6)
SCORE_LANES(score_eight, 8, __attribute__((target_clones("avx2", "default"))))
SCORE_LANES(score_sixteen, 16, __attribute__((target("avx512f"))))
static int has_sixteen(void) { return __builtin_cpu_supports("avx512f"); }
#else
SCORE_LANES(score_eight, 8, )
static const Scorer score_sixteen = NULL;
static int has_sixteen(void) { return 0; }
#endif

enum {
    THRESHOLDS, TREES, KEEPS, STARTS, NAN_TREES, NAN_KEEPS, NAN_STARTS, LEAF_VALUES, X, OUT,
    ARRAYS
};
static const char *const names[ARRAYS] = {
    "thresholds", "trees", "keeps", "starts", "nan_trees", "nan_keeps", "nan_starts",
    "leaf_values", "x", "out",
};

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static void release(Buffer *buffers) {
    for (int i = 0; i < ARRAYS; i++) {
        if (buffers[i].held) PyBuffer_Release(&buffers[i].view);
    }
}

/* Whether ``starts`` (features + 1 of them) runs from 0 to ``entries`` without falling, and
 * every tree index listed is one of the ensemble's. */
static int well_formed(const int32_t *starts, int features, Py_ssize_t entries,
                       const int32_t *trees, int tree_count) {
    if (starts[0] != 0 || starts[features] != entries) return 0;
    for (int f = 0; f < features; f++) {
        if (starts[f + 1] < starts[f]) return 0;
    }
    for (Py_ssize_t k = 0; k < entries; k++) {
        if (trees[k] < 0 || trees[k] >= tree_count) return 0;
    }
    return 1;
}

static PyObject *score(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[ARRAYS];
    Py_ssize_t rows;
    Ensemble e;
    int lanes = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOniif|i", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &objects[6], &objects[7],
                          &objects[8], &objects[9], &rows, &e.features, &e.tree_count, &e.base,
                          &lanes))
        return NULL;
    if (lanes == 0) lanes = has_sixteen() ? 16 : 8;
    if (!(lanes == 8 || (lanes == 16 && has_sixteen()))) {
        PyErr_Format(PyExc_ValueError, "%d lanes: this CPU scores 8%s", lanes,
                     has_sixteen() ? " or 16" : "");
        return NULL;
    }
    const Scorer score_rows = lanes == 16 ? score_sixteen : score_eight;
    if (rows < 0 || e.features < 1 || e.features > MAX_FEATURES || e.tree_count < 0 ||
        e.tree_count > INT32_MAX / MAX_LEAVES) {
        PyErr_Format(PyExc_ValueError, "sizes out of range: %zd rows, %d features (1..%d), %d trees",
                     rows, e.features, MAX_FEATURES, e.tree_count);
        return NULL;
    }
    Buffer buffers[ARRAYS] = {0};
    for (int i = 0; i < ARRAYS; i++) {
        if (PyObject_GetBuffer(objects[i], &buffers[i].view,
                               PyBUF_C_CONTIGUOUS | (i == OUT ? PyBUF_WRITABLE : 0)) < 0) {
            release(buffers);
            return NULL;
        }
        buffers[i].held = 1;
    }
    const Py_ssize_t entries = buffers[THRESHOLDS].view.len / 4;
    const Py_ssize_t nan_entries = buffers[NAN_TREES].view.len / 4;
    const Py_ssize_t expected[ARRAYS] = {
        entries * 4, entries * 4, entries * 4, ((Py_ssize_t)e.features + 1) * 4,
        nan_entries * 4, nan_entries * 4, ((Py_ssize_t)e.features + 1) * 4,
        (Py_ssize_t)e.tree_count * MAX_LEAVES * 4, rows * e.features * 4, rows * 4,
    };
    for (int i = 0; i < ARRAYS; i++) {
        if (buffers[i].view.len != expected[i]) {
            PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, not %zd", names[i],
                         buffers[i].view.len, expected[i]);
            release(buffers);
            return NULL;
        }
    }
    e.thresholds = buffers[THRESHOLDS].view.buf;
    e.trees = buffers[TREES].view.buf;
    e.keeps = buffers[KEEPS].view.buf;
    e.starts = buffers[STARTS].view.buf;
    e.nan_trees = buffers[NAN_TREES].view.buf;
    e.nan_keeps = buffers[NAN_KEEPS].view.buf;
    e.nan_starts = buffers[NAN_STARTS].view.buf;
    e.leaf_values = buffers[LEAF_VALUES].view.buf;
    if (!well_formed(e.starts, e.features, entries, e.trees, e.tree_count) ||
        !well_formed(e.nan_starts, e.features, nan_entries, e.nan_trees, e.tree_count)) {
        PyErr_SetString(PyExc_ValueError, "the ensemble's tables index out of themselves");
        release(buffers);
        return NULL;
    }
    void *leaves = NULL;
    if (e.tree_count > 0) {
        leaves = aligned_alloc(4 * MAX_LANES, 4 * MAX_LANES * (size_t)e.tree_count);
        if (leaves == NULL) {
            release(buffers);
            return PyErr_NoMemory();
        }
    }
    const float *x = buffers[X].view.buf;
    float *out = buffers[OUT].view.buf;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t first = 0; first < rows; first += lanes) {
        const int count = rows - first < lanes ? (int)(rows - first) : lanes;
        score_rows(&e, x, first, count, out, leaves);
    }
    Py_END_ALLOW_THREADS;
    free(leaves);
    release(buffers);
    Py_RETURN_NONE;
}

static PyObject *widest_lanes(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args)) {
    return PyLong_FromLong(has_sixteen() ? 16 : 8);
}

static PyMethodDef methods[] = {
    {"score", score, METH_VARARGS,
     "score(thresholds, trees, keeps, starts, nan_trees, nan_keeps, nan_starts, leaf_values, "
     "x, out, rows, features, trees, base[, lanes]): tree_scorer.py's ensemble over rows of "
     "x, eight or sixteen rows at a time (0, the default: the widest this CPU has)."},
    {"widest_lanes", widest_lanes, METH_NOARGS, "widest_lanes(): 16 where AVX-512 is, else 8."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "models._tree_core",
    "Tree ensembles scored QuickScorer's way (onnxruntime's twin for tree_scorer.py's shape).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tree_core(void) {
    PyObject *made = PyModule_Create(&module);
    if (made == NULL) return NULL;
    if (PyModule_AddStringConstant(made, "SOURCE_SHA256", SOURCE_SHA256) < 0 ||
        PyModule_AddIntConstant(made, "MAX_LEAVES", MAX_LEAVES) < 0 ||
        PyModule_AddIntConstant(made, "MAX_FEATURES", MAX_FEATURES) < 0) {
        Py_DECREF(made);
        return NULL;
    }
    return made;
}
