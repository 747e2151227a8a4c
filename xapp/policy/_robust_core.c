/* The robust policy's numerics in C: the compiled twin of the numpy code in
 * xapp/policy/optimal.py (optimal_weights_batch) and xapp/policy/robust.py (_robust_block,
 * scores_many).
 *
 * A fleet's step decides thousands of CPEs; in numpy each decision builds (candidates × paths
 * × draws) temporaries, about a quarter of a millisecond of memory traffic per CPE and
 * direction. Here one CPE's candidates and draws fit in the first-level cache, and the GIL is
 * let go for the whole batch, so the E2 reader and the HTTP server run meanwhile.
 *
 * The twins must give the same integer weights bit for bit (tests/test_policy_core.py): every
 * value below is computed with the same IEEE operations in the same order as the numpy code,
 * and the build turns floating-point contraction off (a fused multiply-add rounds once, numpy
 * twice). Read the Python first: why each candidate and each charge is there is said there,
 * once.
 *
 * Arrays come in through the buffer protocol, C-contiguous float64 (int64 for the weights
 * out), shaped as the Python side says; lengths are checked here.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PATHS 8
#define MAX_DRAWS 4096
#define MAX_WEIGHT_LIMIT 65535
#define OPTIMAL_SCRATCH(paths, max_weight) (((size_t)(paths) * 4 + 3) * (size_t)(max_weight))

/* The loops below are plain array operations the compiler vectorises. Where it can, each
 * function carrying WIDE_VECTORS is compiled for AVX-512, AVX2 and the x86-64 baseline, and the
 * loader picks the widest the CPU has (function multiversioning): the baseline has no vector
 * truncation, and the weights' floor() was a scalar loop there, two thirds of a decision.
 * The results do not depend on the choice: IEEE division, truncation and comparison give the
 * same double in any vector width, and contraction is off in every build. */
/* glibc only: the loader's choice needs its ifunc (musl has none, and compilers refuse the
 * attribute there; the extension is optional, so its build failing would leave numpy). */
#ifndef WIDE_VECTORS /* defined empty to build one variant (tests/test_policy_core_variants.py) */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && \
    (defined(__clang__) || __GNUC__ >= 6)
#define WIDE_VECTORS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WIDE_VECTORS
#endif
#endif

static const double FLOOR_GUARD = 1 + 1e-12; /* optimal.py: floor() against c/r = k - eps */
static const double TIE = 1 - 1e-9;          /* optimal.py and robust.py: ties */
/* 2^-1000: c / m stays a normal number for every weight m up to MAX_WEIGHT_LIMIT. */
static const double OWN_WEIGHT_KNOWN_FROM = 0x1p-1000;
/* 2^1000: (k + 1) * (c / (k + 1)) stays finite for every weight (optimal_row's one path). */
static const double ONE_PATH_UP_TO = 0x1p1000;

/* fmin as C99 and numpy define it (a NaN operand gives the other), inline: the library call
 * costs more than the comparison, and this runs a few hundred thousand times a decision. */
static inline double least_of(double a, double b) {
    if (a != a) return b;
    if (b != b) return a;
    return b < a ? b : a;
}

/* The smaller of two values neither of which is NaN: a plain select the compiler vectorises
 * in one instruction, where ``least_of`` needs three for its NaN cases. */
static inline double smaller_of(double a, double b) { return b < a ? b : a; }

/* min(max_weight, floor(x)) for x >= 0 (a capacity over a positive rate, or over infinity):
 * truncation is floor there, without a library call; x past max_weight (infinity too) is
 * max_weight either way. */
static inline double capped_floor(double x, int max_weight) {
    return x >= max_weight ? (double)max_weight : (double)(int64_t)x;
}

/* ------------------------------------------------------------------- optimal_weights_batch */

/* Path j's candidate k (0-based: weight k + 1 for path j) is the round rate c_j / (k + 1) and
 * every path's largest weight at that rate. Working one out exactly takes two divisions a
 * path, and a row has paths * max_weight candidates, of which only those tied with the best
 * count. So each is first bounded without a division, and only those whose bound reaches the
 * best (within TIE) are worked out: a handful a row, where the full scan worked out hundreds.
 *
 * The bound. A candidate's round rate is at most path j's own, r = c_j / (k + 1), so its
 * aggregate (its weight sum times its round rate) is at most its weight sum times r; and path
 * i's weight floor(c_i / r), at most floor(c_i / c_j * (k + 1)) taken a little high. Each of
 * the bound's few roundings is far inside the margins BOUND_UP and SHARE_UP (relative, 1e-12
 * and 1e-9 against some 1e-15 of rounding; no quotient here is subnormal: c_j is at least
 * OWN_WEIGHT_KNOWN_FROM, and a share small enough to round badly gives weight 0 either way),
 * and an overflow gives infinity, a bound still. A row whose bounds are all in reach of the
 * best (ties everywhere) is worked out whole, one candidate at a time: dearer than the
 * vectorised scan it replaces, and rare among the starts of real decisions. */
static const double BOUND_UP = 1 + 1e-12;
static const double SHARE_UP = 1 + 1e-9;

/* Path j's rate at weight k + 1: c_j / (k + 1), a rate of 0 taken as infinite. */
static inline double rate_at(double cj, int k) {
    const double rate = cj / (double)(k + 1);
    return rate > 0 ? rate : INFINITY;
}

/* ``optimal_row``'s scratch made ready, once for all the rows it serves: the weights 1 to
 * max_weight and their inverses (read, never written again). */
static void optimal_scratch_ready(double *scratch, int paths, int max_weight) {
    double *counting = scratch + (size_t)paths * 4 * (size_t)max_weight + (size_t)max_weight;
    double *inverse = counting + max_weight;
    for (int k = 0; k < max_weight; k++) {
        counting[k] = (double)(k + 1);
        inverse[k] = 1.0 / (double)(k + 1);
    }
}

/* Four doubles at once (GCC's and Clang's vector extension): a comparison gives a lane mask. */
typedef double four_doubles __attribute__((vector_size(32)));
typedef long long four_masks __attribute__((vector_size(32)));

/* The largest of ``start`` and ``values`` (none NaN), sixteen at a time in four independent
 * vector lanes: a running maximum is one chain of dependent comparisons, which the compiler
 * does not split (that could change which of two equal zeros is kept; no bound here is -0,
 * so the maximum is the same value whatever the order). One chain of four lanes waited on
 * each comparison in turn: a third of an exact optimum's time. */
static inline double largest_of(const double *values, int count, double start) {
    four_doubles lanes[4] = {{start, start, start, start},
                             {start, start, start, start},
                             {start, start, start, start},
                             {start, start, start, start}};
    int k = 0;
    for (; k + 16 <= count; k += 16) {
        for (int chain = 0; chain < 4; chain++) {
            four_doubles v;
            memcpy(&v, values + k + 4 * chain, sizeof v);
            const four_masks more = v > lanes[chain];
            lanes[chain] = (four_doubles)(((four_masks)v & more) | ((four_masks)lanes[chain] & ~more));
        }
    }
    for (; k + 4 <= count; k += 4) {
        four_doubles v;
        memcpy(&v, values + k, sizeof v);
        const four_masks more = v > lanes[0];
        lanes[0] = (four_doubles)(((four_masks)v & more) | ((four_masks)lanes[0] & ~more));
    }
    double largest = start;
    for (int chain = 0; chain < 4; chain++)
        for (int lane = 0; lane < 4; lane++)
            largest = lanes[chain][lane] > largest ? lanes[chain][lane] : largest;
    for (; k < count; k++) largest = values[k] > largest ? values[k] : largest;
    return largest;
}

/* The first place of ``value`` in ``values`` (count - 1 if it is not there before), four
 * places a comparison: the scan for the largest bound's place was a branch a place. */
static inline int first_place_of(const double *values, int count, double value) {
    const four_doubles wanted = {value, value, value, value};
    int k = 0;
    for (; k + 4 <= count; k += 4) {
        four_doubles v;
        memcpy(&v, values + k, sizeof v);
        const four_masks equal = v == wanted;
        if ((equal[0] | equal[1] | equal[2] | equal[3]) != 0) break;
    }
    while (k + 1 < count && values[k] != value) k++;
    return k;
}

/* Path j's candidate k worked out exactly: its weight sum into *total and its aggregate into
 * *aggregate, with numpy's operations in numpy's order (optimal.py). ``own_known``: path j's
 * own weight is k + 1 and its capacity per segment the rate itself: c_j / (c_j / m) rounds to
 * within 2^-52 of m, and the floor guard lifts it above m and below m + 1 (m up to 65535), so
 * the division numpy does gives m exactly, and c_j / m is the rate's own division. A capacity
 * too small for c_j / m to be a normal number is divided out as numpy does. */
static inline void exact_candidate(const double *c, int paths, int j, int k, int max_weight,
                                   int own_known, double *total, double *aggregate) {
    const double by = rate_at(c[j], k);
    const double cap = (double)max_weight;
    double sum = 0, ratio = 0;
    for (int i = 0; i < paths; i++) {
        double weight, per_segment;
        if (i == j && own_known) {
            weight = (double)(k + 1);
            per_segment = by;
        } else {
            /* min(max_weight, floor(x)) for x >= 0: truncation is floor there; x past
             * max_weight (infinity too) is max_weight either way. */
            const double x = trunc((c[i] / by) * FLOOR_GUARD);
            weight = x < cap ? x : cap;
            per_segment = c[i] / weight; /* inf or NaN unweighted: least_of passes over */
        }
        sum = i == 0 ? weight : sum + weight;
        ratio = i == 0 ? per_segment : least_of(ratio, per_segment);
    }
    *total = sum;
    *aggregate = sum * (ratio < INFINITY ? ratio : 0.0);
}

/* Each of path j's candidates' bound (see above) into ``bound[max_weight]``; ``weights`` is
 * max_weight doubles of scratch. Plain array loops over k the compiler vectorises: a
 * multiplication, a truncation and a select a path and candidate, where working a candidate
 * out divides twice a path. */
WIDE_VECTORS
static void bound_candidates(const double *c, int paths, int j, int max_weight,
                             const double *counting, const double *inverse, double *weights,
                             double *bound) {
    const double cap = (double)max_weight;
    double *restrict sum = weights;
    for (int k = 0; k < max_weight; k++) sum[k] = counting[k]; /* its own, k + 1 */
    for (int i = 0; i < paths; i++) {
        if (i == j) continue;
        const double share = (c[i] / c[j]) * SHARE_UP;
        for (int k = 0; k < max_weight; k++) {
            const double x = trunc(share * counting[k]);
            sum[k] = sum[k] + (x < cap ? x : cap);
        }
    }
    const double rate_up = c[j] * BOUND_UP;
    for (int k = 0; k < max_weight; k++) bound[k] = (sum[k] * rate_up) * inverse[k];
}

/* Whether any of ``values[k .. k + 3]`` is at least ``from``: one vector comparison, so that
 * a scan for the few candidates in reach skips four at a time. */
static inline int any_of_four_from(const double *values, double from) {
    four_doubles v;
    memcpy(&v, values, sizeof v);
    const four_doubles at = {from, from, from, from};
    const four_masks reached = v >= at;
    return (reached[0] | reached[1] | reached[2] | reached[3]) != 0;
}

/* ``any_of_four_from`` over ``values[k .. k + 15]``: the four comparisons' lanes joined as
 * vectors, then read once (reading a mask's lanes out costs more than comparing them). */
static inline int any_of_sixteen_from(const double *values, double from) {
    const four_doubles at = {from, from, from, from};
    four_masks reached = {0, 0, 0, 0};
    for (int quarter = 0; quarter < 4; quarter++) {
        four_doubles v;
        memcpy(&v, values + 4 * quarter, sizeof v);
        reached |= v >= at;
    }
    return (reached[0] | reached[1] | reached[2] | reached[3]) != 0;
}

/* The exact optimum of one row of capacities into weights[paths]; scratch holds
 * OPTIMAL_SCRATCH doubles, made ready by ``optimal_scratch_ready``. The weights chosen are
 * those the full scan chooses (optimal.py): the best aggregate, and of the candidates within
 * TIE of it the least weight sum, the first in path then k order. */
WIDE_VECTORS
static void optimal_row(const double *c, int paths, int max_weight, double *scratch,
                        int64_t *weights) {
    const size_t span = (size_t)max_weight;
    /* The candidates worked out, in path then k order: each one's place (j * max_weight + k),
     * weight sum and aggregate. */
    double *worked_at = scratch;                           /* up to paths * max_weight */
    double *worked_total = worked_at + (size_t)paths * span;
    double *worked_aggregate = worked_total + (size_t)paths * span;
    double *bounds = worked_aggregate + (size_t)paths * span; /* paths * max_weight */
    double *sums = bounds + (size_t)paths * span;              /* max_weight */
    const double *counting = sums + span;                      /* 1..max_weight */
    const double *inverse = counting + span;                   /* 1 / (1..max_weight) */
    /* A path without capacity has every candidate's weights 0 and aggregate 0: the best is at
     * least 0, and none of its candidates can be tied with a best above 0 (nor matter with a
     * best of 0: no weights then). */
    /* One path with capacity and the rest without (a CPE on one access, or a start with the
     * others dropped: a tenth of a robust search's starts, two thirds of its candidates
     * worked out): every candidate of that path carries c_j within an ulp or two, so all of
     * them are tied, and the least weight sum is its weight 1, the others 0. The full scan
     * works out all max_weight candidates to find that. (Kept to capacities whose own rate is
     * known exactly and far from overflow, where the scan's arithmetic shows the same.) */
    int positive = 0, only = -1;
    for (int j = 0; j < paths; j++) {
        if (c[j] > 0) {
            positive++;
            only = j;
        }
    }
    if (positive == 1 && c[only] >= OWN_WEIGHT_KNOWN_FROM && c[only] <= ONE_PATH_UP_TO) {
        for (int i = 0; i < paths; i++) weights[i] = i == only;
        return;
    }
    double best = -INFINITY;
    double top = -INFINITY; /* the largest bound, and whose */
    int top_j = -1, top_k = 0;
    for (int j = 0; j < paths; j++) {
        if (c[j] == 0) {
            best = 0.0 > best ? 0.0 : best;
        } else if (c[j] >= OWN_WEIGHT_KNOWN_FROM) {
            double *bound = bounds + (size_t)j * span;
            bound_candidates(c, paths, j, max_weight, counting, inverse, sums, bound);
            const double largest = largest_of(bound, max_weight, -INFINITY);
            if (top_j < 0 || largest > top) {
                top = largest;
                top_j = j;
                top_k = first_place_of(bound, max_weight, largest);
            }
        }
    }
    /* The candidate of the largest bound, worked out: the best is at least its aggregate, so
     * a candidate whose bound is below that (within TIE) can neither be the best nor be tied
     * with it, and is not worked out. */
    if (top_j >= 0) {
        double total, aggregate;
        exact_candidate(c, paths, top_j, top_k, max_weight, 1, &total, &aggregate);
        best = aggregate > best ? aggregate : best;
    }
    const double reach_from = best * TIE;
    int worked = 0;
    for (int j = 0; j < paths; j++) {
        if (c[j] == 0) continue;
        const int own_known = c[j] >= OWN_WEIGHT_KNOWN_FROM;
        const double *bound = bounds + (size_t)j * span;
        int k = 0;
        for (;;) {
            /* (a capacity so small its rates are not normal numbers has no bounds: every one
             * of its candidates is worked out) */
            if (own_known) {
                while (k + 16 <= max_weight && !any_of_sixteen_from(bound + k, reach_from))
                    k += 16;
                while (k + 4 <= max_weight && !any_of_four_from(bound + k, reach_from)) k += 4;
                while (k < max_weight && !(bound[k] >= reach_from)) k++;
            }
            if (k >= max_weight) break;
            double total, aggregate;
            exact_candidate(c, paths, j, k, max_weight, own_known, &total, &aggregate);
            if (aggregate >= reach_from) {
                worked_at[worked] = (double)(j * max_weight + k);
                worked_total[worked] = total;
                worked_aggregate[worked] = aggregate;
                worked++;
                best = aggregate > best ? aggregate : best;
            }
            k++;
        }
    }
    if (!(best > 0)) {
        for (int i = 0; i < paths; i++) weights[i] = 0;
        return;
    }
    /* In path then k order, as numpy's argmin over the ties sees them: the first of the least
     * weight sum among the tied. */
    int chosen = 0;
    double least = INFINITY;
    const double tied_from = best * TIE;
    for (int w = 0; w < worked; w++) {
        if (worked_aggregate[w] >= tied_from && worked_total[w] < least) {
            least = worked_total[w];
            chosen = (int)worked_at[w];
        }
    }
    const int j = chosen / max_weight, k = chosen % max_weight + 1;
    const double rate = c[j] / (double)k;
    const double chosen_divisor = rate > 0 ? rate : INFINITY;
    for (int i = 0; i < paths; i++)
        weights[i] = (int64_t)capped_floor((c[i] / chosen_divisor) * FLOOR_GUARD, max_weight);
}

/* --------------------------------------------------------------- the aggregate over beliefs */

/* How many of ``values`` are below ``pivot``, and how many equal to it: one pass the
 * compiler vectorises. */
WIDE_VECTORS
static void count_around(const double *values, int count, double pivot, int *below, int *equal) {
    int less = 0, same = 0;
    for (int d = 0; d < count; d++) {
        less += values[d] < pivot;
        same += values[d] == pivot;
    }
    *below = less;
    *equal = same;
}

/* How many of ``values`` are -inf, +inf and NaN: one pass the compiler vectorises. */
WIDE_VECTORS
static void count_unbounded(const double *values, int count, int *negative, int *positive,
                            int *nan) {
    int below = 0, above = 0, missing = 0;
    for (int d = 0; d < count; d++) {
        below += values[d] == -INFINITY;
        above += values[d] == INFINITY;
        missing += values[d] != values[d];
    }
    *negative = below;
    *positive = above;
    *nan = missing;
}

/* Values left between the bounds at which ``order_statistic`` stops counting: it gathers them
 * and picks the answer among them. */
#define FEW_LEFT 24

/* The values strictly between ``low`` and ``high`` (NaN is not) into ``into``, in order; how
 * many. A select per value the compiler may vectorise, and no branch on the values. */
static int gathered_between(const double *values, int count, double low, double high,
                            double *into) {
    int taken = 0;
    for (int d = 0; d < count; d++) {
        into[taken] = values[d];
        taken += values[d] > low && values[d] < high;
    }
    return taken;
}

/* The value of rank ``rank`` among ``few`` values (none NaN), by insertion: a handful. */
static double picked_among(double *few, int count, int rank) {
    for (int i = 1; i < count; i++) {
        const double value = few[i];
        int j = i;
        for (; j > 0 && few[j - 1] > value; j--) few[j] = few[j - 1];
        few[j] = value;
    }
    return few[rank];
}

/* The value of rank ``rank`` if ``values`` were sorted as numpy sorts (NaN last), without
 * moving them: the answer's bounds narrowed by counting around a pivot drawn from the values
 * still between them. Quickselect's swaps took a fifth of a decision, most of it in branches
 * on the draws that the predictor cannot learn; a count is a plain loop. Each pass takes at
 * least the pivot out of the bounds, and the answer stays strictly between them (infinities
 * and NaN are answered first), so the search ends. Once at most FEW_LEFT values are left
 * between the bounds, they are gathered in one more pass and the answer picked among them:
 * the last passes' pivots were the dearest part, each found by walking the values for one
 * of the few still between the bounds, a branch a value. */
static double order_statistic(const double *values, int count, int rank) {
    int negative, positive, nan;
    count_unbounded(values, count, &negative, &positive, &nan);
    if (rank >= count - nan) return NAN;
    if (rank >= count - nan - positive) return INFINITY;
    if (rank < negative) return -INFINITY;
    double low = -INFINITY, high = INFINITY; /* the answer lies strictly between */
    int at_or_below = negative;              /* how many values are at most low */
    int at_or_above = positive + nan;        /* how many are at least high, or NaN */
    unsigned int next = 2654435761u;         /* where the next pivot is looked for */
    for (;;) {
        const int left = count - at_or_below - at_or_above;
        if (left <= FEW_LEFT) {
            double few[FEW_LEFT + 1]; /* (the gather writes one past the last taken) */
            gathered_between(values, count, low, high, few);
            return picked_among(few, left, rank - at_or_below);
        }
        int at = (int)(next % (unsigned int)count);
        while (!(values[at] > low && values[at] < high)) at = at + 1 == count ? 0 : at + 1;
        const double pivot = values[at];
        int below, equal;
        count_around(values, count, pivot, &below, &equal);
        if (rank < below) {
            high = pivot;
            at_or_above = count - below;
        } else if (rank < below + equal) {
            return pivot;
        } else {
            low = pivot;
            at_or_below = below + equal;
        }
        next = next * 1664525u + 1013904223u;
    }
}

/* Whether the value of rank ``rank`` (were ``values`` sorted) is below ``threshold``: fewer
 * than count - rank values at or above it. One pass the compiler vectorises. */
WIDE_VECTORS
static int below_at_rank(const double *values, int count, int rank, double threshold) {
    int at_or_above = 0;
    for (int d = 0; d < count; d++) at_or_above += values[d] >= threshold;
    return at_or_above < count - rank;
}

/* robust.py's _aggregates_at_risk_many for one CPE and one weight set: ``expected[draws]``
 * from its (paths, draws) capacities ``draws``, each weighted path's outage charged.
 * ``ratios`` holds paths * draws doubles: each path's capacity per segment of the round,
 * divided once and read again for the aggregate without each path. */
WIDE_VECTORS
static void aggregates_at_risk(const double *weights, const double *draws, const double *risks,
                               double stall, int paths, int count, double *ratios,
                               double *ratios_of, double *full, double *expected) {
    int weighted[MAX_PATHS];
    double counted[MAX_PATHS];
    double total = 0;
    for (int p = 0; p < paths; p++) {
        weighted[p] = weights[p] > 0;
        counted[p] = weighted[p] ? weights[p] : 0.0;
        total = p == 0 ? counted[p] : total + counted[p];
        double *ratio = ratios + (size_t)p * count;
        const double *capacity = draws + (size_t)p * count;
        /* A CPE's candidates share most of their weights (the largest path's is mostly the
         * cap): a path's ratios are divided out again only for a weight they were not for
         * (``ratios_of[p]``, NaN before the first: the draws change with the CPE). */
        if (ratios_of[p] == weights[p]) continue;
        ratios_of[p] = weights[p];
        if (weighted[p]) {
            for (int d = 0; d < count; d++) ratio[d] = capacity[d] / weights[p];
        } else {
            for (int d = 0; d < count; d++) ratio[d] = INFINITY;
        }
    }
    /* The least ratio per draw, path by path (paths outer, draws inner: a vector loop). No
     * ratio is NaN: the draws are finite and not negative (both callers take only sane
     * beliefs, robust.py's _sane), a weighted path's ratio a draw over a positive weight and
     * an unweighted one's infinite. */
    for (int d = 0; d < count; d++) full[d] = ratios[d];
    for (int p = 1; p < paths; p++) {
        const double *restrict ratio = ratios + (size_t)p * count;
        for (int d = 0; d < count; d++) full[d] = smaller_of(full[d], ratio[d]);
    }
    for (int d = 0; d < count; d++) {
        full[d] = total * (isfinite(full[d]) ? full[d] : 0.0);
        expected[d] = full[d];
    }
    double after_stall = 0.5 - stall;
    if (!(after_stall > 0.0)) after_stall = 0.0;
    for (int path = 0; path < paths; path++) {
        const double probability = risks[path];
        if (!(weighted[path] && probability > 0)) continue;
        double rest_total = 0;
        int first = 1;
        for (int p = 0; p < paths; p++) {
            if (p == path) continue;
            rest_total = first ? counted[p] : rest_total + counted[p];
            first = 0;
        }
        double least[MAX_DRAWS];
        for (int d = 0; d < count; d++) least[d] = INFINITY;
        for (int p = 0; p < paths; p++) {
            if (p == path) continue;
            const double *restrict ratio = ratios + (size_t)p * count;
            for (int d = 0; d < count; d++) least[d] = smaller_of(least[d], ratio[d]);
        }
        for (int d = 0; d < count; d++) {
            const double rest = rest_total * (isfinite(least[d]) ? least[d] : 0.0);
            const double dark = 0.5 * full[d] + after_stall * rest;
            expected[d] = expected[d] - probability * (full[d] - dark);
        }
    }
}

/* Whether any weighted path has an outage to charge (``aggregates_at_risk``'s charges). */
static int charged(const double *weights, const double *risks, int paths) {
    for (int p = 0; p < paths; p++)
        if (weights[p] > 0 && risks[p] > 0) return 1;
    return 0;
}

/* (paths, count) capacities drawn from one CPE's beliefs, never below 0 (np.maximum(0, x):
 * a NaN stays NaN). Each path's mean and σ read once and the rows marked restrict, and the
 * clamp written as two selects: so the compiler makes it a vector loop, where it had been one
 * draw at a time with two branches each (a sixth of a step's scoring at 100 ms). */
WIDE_VECTORS
static void belief_draws(const double *restrict means, const double *restrict stddevs,
                         const double *restrict normal, int paths, int count,
                         double *restrict draws) {
    for (int p = 0; p < paths; p++) {
        const double mean = means[p], stddev = stddevs[p];
        const double *restrict z = normal + (size_t)p * count;
        double *restrict drawn = draws + (size_t)p * count;
        for (int d = 0; d < count; d++) {
            const double x = mean + stddev * z[d];
            const double kept = x > 0.0 ? x : 0.0;
            drawn[d] = x == x ? kept : x;
        }
    }
}

static int lexicographically_before(const int64_t *a, const int64_t *b, int paths) {
    for (int p = 0; p < paths; p++) {
        if (a[p] != b[p]) return a[p] < b[p];
    }
    return 0;
}

/* ------------------------------------------------------------------- argument handling */

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static void release(Buffer *buffers, int count) {
    for (int i = 0; i < count; i++) {
        if (buffers[i].held) PyBuffer_Release(&buffers[i].view);
    }
}

static int take(PyObject *object, Buffer *buffer, Py_ssize_t items, Py_ssize_t item_size,
                int writable, const char *name) {
    if (PyObject_GetBuffer(object, &buffer->view,
                           PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    buffer->held = 1;
    if (buffer->view.len != items * item_size) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, not %zd", name, buffer->view.len,
                     items * item_size);
        return -1;
    }
    return 0;
}

static int check_sizes(int rows, int paths, int count, int rank) {
    if (rows < 0 || paths < 1 || paths > MAX_PATHS || count < 1 || count > MAX_DRAWS ||
        rank < 0 || rank >= count) {
        PyErr_Format(PyExc_ValueError,
                     "sizes out of range: rows %d, paths %d (1..%d), draws %d (1..%d), rank %d",
                     rows, paths, MAX_PATHS, count, MAX_DRAWS, rank);
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------------------- the module */

static PyObject *optimal(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *capacities_object, *out_object;
    int rows, paths, max_weight;
    if (!PyArg_ParseTuple(args, "OOiii", &capacities_object, &out_object, &rows, &paths,
                          &max_weight))
        return NULL;
    if (rows < 0 || paths < 1 || paths > MAX_PATHS || max_weight < 1 ||
        max_weight > MAX_WEIGHT_LIMIT) {
        PyErr_Format(PyExc_ValueError, "sizes out of range: rows %d, paths %d, max_weight %d",
                     rows, paths, max_weight);
        return NULL;
    }
    Buffer buffers[2] = {0};
    if (take(capacities_object, &buffers[0], (Py_ssize_t)rows * paths, 8, 0, "capacities") ||
        take(out_object, &buffers[1], (Py_ssize_t)rows * paths, 8, 1, "out")) {
        release(buffers, 2);
        return NULL;
    }
    double *scratch = malloc(sizeof(double) * OPTIMAL_SCRATCH(paths, max_weight));
    if (scratch == NULL) {
        release(buffers, 2);
        return PyErr_NoMemory();
    }
    optimal_scratch_ready(scratch, paths, max_weight);
    const double *capacities = buffers[0].view.buf;
    int64_t *out = buffers[1].view.buf;
    Py_BEGIN_ALLOW_THREADS;
    for (int row = 0; row < rows; row++)
        optimal_row(capacities + (size_t)row * paths, paths, max_weight, scratch,
                    out + (size_t)row * paths);
    Py_END_ALLOW_THREADS;
    free(scratch);
    release(buffers, 2);
    Py_RETURN_NONE;
}

static PyObject *robust(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[6];
    int rows, paths, count, max_weight, rank, candidate_draws;
    double z;
    if (!PyArg_ParseTuple(args, "OOOOOOiiiidii", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &rows, &paths, &count,
                          &max_weight, &z, &rank, &candidate_draws))
        return NULL;
    if (check_sizes(rows, paths, count, rank)) return NULL;
    if (max_weight < 1 || max_weight > MAX_WEIGHT_LIMIT || candidate_draws < 0 ||
        candidate_draws > count) {
        PyErr_Format(PyExc_ValueError, "max_weight %d or candidate draws %d out of range",
                     max_weight, candidate_draws);
        return NULL;
    }
    const Py_ssize_t cells = (Py_ssize_t)rows * paths;
    Buffer buffers[6] = {0};
    if (take(objects[0], &buffers[0], cells, 8, 0, "means") ||
        take(objects[1], &buffers[1], cells, 8, 0, "stddevs") ||
        take(objects[2], &buffers[2], cells, 8, 0, "risks") ||
        take(objects[3], &buffers[3], rows, 8, 0, "stalls") ||
        take(objects[4], &buffers[4], (Py_ssize_t)paths * count, 8, 0, "normal") ||
        take(objects[5], &buffers[5], cells, 8, 1, "out")) {
        release(buffers, 6);
        return NULL;
    }
    const int starts = 2 + 2 * paths + candidate_draws;
    const size_t doubles = OPTIMAL_SCRATCH(paths, max_weight)
                           + 2 * (size_t)paths * count             /* draws, ratios */
                           + 2 * (size_t)count                     /* full, expected */
                           + (size_t)starts * paths                /* one start */
                           + (size_t)starts;                       /* scores */
    double *scratch = malloc(sizeof(double) * doubles);
    int64_t *candidates = malloc(sizeof(int64_t) * (size_t)starts * paths);
    if (scratch == NULL || candidates == NULL) {
        free(scratch);
        free(candidates);
        release(buffers, 6);
        return PyErr_NoMemory();
    }
    const double *means_all = buffers[0].view.buf, *stddevs_all = buffers[1].view.buf;
    const double *risks_all = buffers[2].view.buf, *stalls = buffers[3].view.buf;
    const double *normal = buffers[4].view.buf;
    int64_t *out = buffers[5].view.buf;

    Py_BEGIN_ALLOW_THREADS;
    double *optimal_scratch = scratch;
    optimal_scratch_ready(optimal_scratch, paths, max_weight);
    double *draws = optimal_scratch + OPTIMAL_SCRATCH(paths, max_weight);
    double *ratios = draws + (size_t)paths * count;
    double *full = ratios + (size_t)paths * count;
    double *expected = full + count;
    double *start = expected + count;
    double *scores = start + (size_t)starts * paths;
    /* Each path's standard draw of the score's rank: a path's draws are max(0, mean + σ · z),
     * which never fall as z rises (σ >= 0, each operation monotonic), so the draw of that
     * rank among a CPE's draws of the path is the one made from it. */
    double normal_at_rank[MAX_PATHS];
    for (int p = 0; p < paths; p++)
        normal_at_rank[p] = order_statistic(normal + (size_t)p * count, count, rank);
    for (int row = 0; row < rows; row++) {
        const double *means = means_all + (size_t)row * paths;
        const double *stddevs = stddevs_all + (size_t)row * paths;
        const double *risks = risks_all + (size_t)row * paths;
        belief_draws(means, stddevs, normal, paths, count, draws);
        double ratios_of[MAX_PATHS]; /* the weight each path's ratios are for: none yet */
        for (int p = 0; p < paths; p++) ratios_of[p] = NAN;
        double lowered[MAX_PATHS], at_rank[MAX_PATHS];
        for (int p = 0; p < paths; p++) {
            const double x = means[p] + z * stddevs[p];
            lowered[p] = x > 0.0 ? x : (x == x ? 0.0 : x);
            const double y = means[p] + stddevs[p] * normal_at_rank[p]; /* as belief_draws */
            at_rank[p] = y > 0.0 ? y : (y == y ? 0.0 : y);
        }
        /* The starts: the point estimates, all lowered, each one lowered, each one dropped,
         * then the first draws. */
        for (int s = 0; s < starts; s++) {
            double *row_start = start + (size_t)s * paths;
            for (int p = 0; p < paths; p++) {
                if (s == 1)
                    row_start[p] = lowered[p];
                else if (s >= 2 + 2 * paths)
                    row_start[p] = draws[p * count + (s - 2 - 2 * paths)];
                else
                    row_start[p] = means[p];
            }
            if (s >= 2 && s < 2 + paths) row_start[s - 2] = lowered[s - 2];
            if (s >= 2 + paths && s < 2 + 2 * paths) row_start[s - 2 - paths] = 0.0;
            optimal_row(row_start, paths, max_weight, optimal_scratch,
                        candidates + (size_t)s * paths);
        }
        int chosen = -1;
        double best = -INFINITY;
        for (int s = 0; s < starts; s++) {
            double weights[MAX_PATHS];
            int64_t total = 0;
            for (int p = 0; p < paths; p++) {
                weights[p] = (double)candidates[(size_t)s * paths + p];
                total += candidates[(size_t)s * paths + p];
            }
            if (total <= 0) {
                scores[s] = -INFINITY;
                continue;
            }
            /* The starts often lead to the same weights: those score alike, once. */
            int seen = -1;
            for (int before = 0; before < s && seen < 0; before++) {
                if (memcmp(candidates + (size_t)before * paths, candidates + (size_t)s * paths,
                           sizeof(int64_t) * paths) == 0)
                    seen = before;
            }
            if (seen >= 0) {
                scores[s] = scores[seen];
                continue;
            }
            /* A candidate whose aggregates cannot reach the best so far (within 1e-9) is
             * passed over before they are worked out, as below: with no weighted path at
             * risk, its aggregate in each draw is its weight sum times its least ratio, at
             * most its weight sum times path j's ratio for each weighted j, so its score (the
             * draws' value of rank ``rank``) is at most the sum times path j's draw of that
             * rank over j's weight, rounded as the aggregate is (each operation monotonic).
             * Half a fleet's candidates are passed over so, before their divisions. */
            if (best > 0 && !charged(weights, risks, paths)) {
                double bound = INFINITY;
                for (int p = 0; p < paths; p++) {
                    if (!(weights[p] > 0)) continue;
                    const double own = (double)total * (at_rank[p] / weights[p]);
                    bound = own < bound ? own : bound;
                }
                if (bound < best * TIE) {
                    scores[s] = -INFINITY;
                    continue;
                }
            }
            aggregates_at_risk(weights, draws, risks, stalls[row], paths, count, ratios,
                               ratios_of, full, expected);
            /* A candidate that cannot come within 1e-9 of the best so far cannot win, nor be
             * tied with the best at the end (the best only rises, and with it best * TIE while
             * it is above 0): fewer than count - rank aggregates at or above best * TIE put its
             * order statistic below that, which a count tells sooner than the selection. */
            if (best > 0 && below_at_rank(expected, count, rank, best * TIE)) {
                scores[s] = -INFINITY;
                continue;
            }
            scores[s] = order_statistic(expected, count, rank);
            if (scores[s] > best) best = scores[s];
        }
        /* Of the candidates within 1e-9 of the best: the least weight sum, then the first in
         * lexicographic order. */
        int64_t least = INT64_MAX;
        int weighing = 0;
        for (int s = 0; s < starts; s++) {
            const int64_t *candidate = candidates + (size_t)s * paths;
            int64_t total = 0;
            for (int p = 0; p < paths; p++) total += candidate[p];
            weighing |= total > 0;
            if (total <= 0 || !(scores[s] >= best * TIE)) continue;
            if (total < least ||
                (total == least &&
                 lexicographically_before(candidate, candidates + (size_t)chosen * paths,
                                          paths))) {
                least = total;
                chosen = s;
            }
        }
        /* No tie at all (a negative best score, the outages charged more than the aggregate):
         * numpy's argmin over nothing but "not tied" takes the first candidate. */
        if (chosen < 0 && weighing) chosen = 0;
        for (int p = 0; p < paths; p++)
            out[(size_t)row * paths + p] =
                chosen < 0 ? 0 : candidates[(size_t)chosen * paths + p];
    }
    Py_END_ALLOW_THREADS;
    free(scratch);
    free(candidates);
    release(buffers, 6);
    Py_RETURN_NONE;
}

static PyObject *scores(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[7];
    int rows, sets, paths, count, rank;
    if (!PyArg_ParseTuple(args, "OOOOOOOiiiii", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &objects[6], &rows, &sets,
                          &paths, &count, &rank))
        return NULL;
    if (check_sizes(rows, paths, count, rank)) return NULL;
    if (sets < 0) {
        PyErr_Format(PyExc_ValueError, "sets %d out of range", sets);
        return NULL;
    }
    const Py_ssize_t cells = (Py_ssize_t)rows * paths;
    Buffer buffers[7] = {0};
    if (take(objects[0], &buffers[0], (Py_ssize_t)rows * sets * paths, 8, 0, "weights") ||
        take(objects[1], &buffers[1], cells, 8, 0, "means") ||
        take(objects[2], &buffers[2], cells, 8, 0, "stddevs") ||
        take(objects[3], &buffers[3], cells, 8, 0, "risks") ||
        take(objects[4], &buffers[4], rows, 8, 0, "stalls") ||
        take(objects[5], &buffers[5], (Py_ssize_t)paths * count, 8, 0, "normal") ||
        take(objects[6], &buffers[6], (Py_ssize_t)rows * sets, 8, 1, "out")) {
        release(buffers, 7);
        return NULL;
    }
    double *scratch = malloc(sizeof(double) * (2 * (size_t)paths * count + 2 * (size_t)count));
    if (scratch == NULL) {
        release(buffers, 7);
        return PyErr_NoMemory();
    }
    const double *weights = buffers[0].view.buf, *means = buffers[1].view.buf;
    const double *stddevs = buffers[2].view.buf, *risks = buffers[3].view.buf;
    const double *stalls = buffers[4].view.buf, *normal = buffers[5].view.buf;
    double *out = buffers[6].view.buf;
    Py_BEGIN_ALLOW_THREADS;
    double *draws = scratch, *ratios = draws + (size_t)paths * count;
    double *full = ratios + (size_t)paths * count, *expected = full + count;
    for (int row = 0; row < rows; row++) {
        belief_draws(means + (size_t)row * paths, stddevs + (size_t)row * paths, normal, paths,
                     count, draws);
        double ratios_of[MAX_PATHS]; /* the weight each path's ratios are for: none yet */
        for (int p = 0; p < paths; p++) ratios_of[p] = NAN;
        for (int s = 0; s < sets; s++) {
            aggregates_at_risk(weights + ((size_t)row * sets + s) * paths, draws,
                               risks + (size_t)row * paths, stalls[row], paths, count, ratios,
                               ratios_of, full, expected);
            out[(size_t)row * sets + s] = order_statistic(expected, count, rank);
        }
    }
    Py_END_ALLOW_THREADS;
    free(scratch);
    release(buffers, 7);
    Py_RETURN_NONE;
}

/* robust.py's reach_many: per row, the value of rank ``rank`` of the beliefs' draws summed
 * over the paths (path by path, in order, as the twin sums them). */
static PyObject *reach(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[4];
    int rows, paths, count, rank;
    if (!PyArg_ParseTuple(args, "OOOOiiii", &objects[0], &objects[1], &objects[2], &objects[3],
                          &rows, &paths, &count, &rank))
        return NULL;
    if (check_sizes(rows, paths, count, rank)) return NULL;
    const Py_ssize_t cells = (Py_ssize_t)rows * paths;
    Buffer buffers[4] = {0};
    if (take(objects[0], &buffers[0], cells, 8, 0, "means") ||
        take(objects[1], &buffers[1], cells, 8, 0, "stddevs") ||
        take(objects[2], &buffers[2], (Py_ssize_t)paths * count, 8, 0, "normal") ||
        take(objects[3], &buffers[3], rows, 8, 1, "out")) {
        release(buffers, 4);
        return NULL;
    }
    double *scratch = malloc(sizeof(double) * ((size_t)paths * count + (size_t)count));
    if (scratch == NULL) {
        release(buffers, 4);
        return PyErr_NoMemory();
    }
    const double *means = buffers[0].view.buf, *stddevs = buffers[1].view.buf;
    const double *normal = buffers[2].view.buf;
    double *out = buffers[3].view.buf;
    Py_BEGIN_ALLOW_THREADS;
    double *draws = scratch, *sum = draws + (size_t)paths * count;
    for (int row = 0; row < rows; row++) {
        belief_draws(means + (size_t)row * paths, stddevs + (size_t)row * paths, normal, paths,
                     count, draws);
        for (int d = 0; d < count; d++) sum[d] = draws[d];
        for (int p = 1; p < paths; p++) {
            const double *restrict path = draws + (size_t)p * count;
            for (int d = 0; d < count; d++) sum[d] = sum[d] + path[d];
        }
        out[row] = order_statistic(sum, count, rank);
    }
    Py_END_ALLOW_THREADS;
    free(scratch);
    release(buffers, 4);
    Py_RETURN_NONE;
}

/* The largest sum over the frontier's tuples of each path's value at its rank (``values[p]``
 * for path p: its draws, or zeros for a path left out), summed path by path in order. */
WIDE_VECTORS
static double frontier_max(const double *const *values, const int32_t *frontier, int paths,
                           int tuples) {
    double best = -INFINITY;
    if (paths == 3) { /* a fleet's CPEs: the loop the compiler can vectorise */
        const double *restrict v0 = values[0], *restrict v1 = values[1];
        const double *restrict v2 = values[2];
        const int32_t *restrict f0 = frontier, *restrict f1 = frontier + tuples;
        const int32_t *restrict f2 = frontier + 2 * (size_t)tuples;
        for (int k = 0; k < tuples; k++) {
            const double summed = (v0[f0[k]] + v1[f1[k]]) + v2[f2[k]];
            best = summed > best ? summed : best;
        }
        return best;
    }
    for (int k = 0; k < tuples; k++) {
        double summed = values[0][frontier[k]];
        for (int p = 1; p < paths; p++)
            summed = summed + values[p][frontier[(size_t)p * tuples + k]];
        best = summed > best ? summed : best;
    }
    return best;
}

/* robust.py's frontier_bound_many: per row, the most any weights' score can be (charged for
 * the outages of the paths at risk that are weighted, over every choice of those), and the
 * draws' scale, in the twin's operations and order (robust.py's _frontier_block). */
static void frontier_row(const double *means, const double *stddevs, const double *risks,
                         double stall, const double *levels, const double *highest,
                         const int32_t *frontier, int paths, int level_count, int tuples,
                         double *drawn, const double *zeros, double *bound_out,
                         double *scale_out) {
    double top[MAX_PATHS] = {0};
    for (int p = 0; p < paths; p++) {
        const double mean = means[p], stddev = stddevs[p];
        for (int t = 0; t < level_count; t++) {
            const double x = mean + stddev * levels[(size_t)p * level_count + t];
            drawn[(size_t)p * level_count + t] = x > 0.0 ? x : 0.0;
        }
        const double y = mean + stddev * highest[p];
        top[p] = y > 0.0 ? y : 0.0;
    }
    double scale = top[0];
    for (int p = 1; p < paths; p++) scale = scale + top[p];
    const double after_stall = 0.5 - stall > 0.0 ? 0.5 - stall : 0.0;
    double bound = 0.0;
    for (int left_out = 0; left_out < (1 << paths); left_out++) {
        if (left_out == (1 << paths) - 1) continue; /* nothing weighted */
        int valid = 1;
        for (int p = 0; p < paths; p++)
            if (((left_out >> p) & 1) && !(risks[p] > 0)) valid = 0;
        if (!valid) continue;
        const double *by_path[MAX_PATHS];
        for (int p = 0; p < paths; p++)
            by_path[p] = ((left_out >> p) & 1) ? zeros : drawn + (size_t)p * level_count;
        const double best = frontier_max(by_path, frontier, paths, tuples);
        double weighted_risk = 0.0;
        for (int p = 0; p < paths; p++)
            if (!((left_out >> p) & 1)) weighted_risk = weighted_risk + risks[p];
        double rest = 0.0;
        for (int p = 0; p < paths; p++)
            if (!((left_out >> p) & 1)) rest = rest + (weighted_risk - risks[p]) * top[p];
        const double share = 1.0 - 0.5 * weighted_risk;
        const double charged = (share > 0.0 ? share : 0.0) * best + after_stall * rest;
        bound = charged > bound ? charged : bound;
    }
    *bound_out = bound;
    *scale_out = scale;
}

static PyObject *frontier(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[9];
    int rows, paths, level_count, tuples;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOiiii", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &objects[6], &objects[7],
                          &objects[8], &rows, &paths, &level_count, &tuples))
        return NULL;
    if (rows < 0 || paths < 1 || paths > MAX_PATHS || level_count < 1 ||
        level_count > MAX_DRAWS || tuples < 1) {
        PyErr_Format(PyExc_ValueError,
                     "sizes out of range: rows %d, paths %d (1..%d), levels %d (1..%d), "
                     "tuples %d",
                     rows, paths, MAX_PATHS, level_count, MAX_DRAWS, tuples);
        return NULL;
    }
    const Py_ssize_t cells = (Py_ssize_t)rows * paths;
    Buffer buffers[9] = {0};
    if (take(objects[0], &buffers[0], cells, 8, 0, "means") ||
        take(objects[1], &buffers[1], cells, 8, 0, "stddevs") ||
        take(objects[2], &buffers[2], cells, 8, 0, "risks") ||
        take(objects[3], &buffers[3], rows, 8, 0, "stalls") ||
        take(objects[4], &buffers[4], (Py_ssize_t)paths * level_count, 8, 0, "levels") ||
        take(objects[5], &buffers[5], paths, 8, 0, "highest") ||
        take(objects[6], &buffers[6], (Py_ssize_t)paths * tuples, 4, 0, "frontier") ||
        take(objects[7], &buffers[7], rows, 8, 1, "bound") ||
        take(objects[8], &buffers[8], rows, 8, 1, "scale")) {
        release(buffers, 9);
        return NULL;
    }
    const int32_t *tuples_at = buffers[6].view.buf;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)paths * tuples; i++) {
        if (tuples_at[i] < 0 || tuples_at[i] >= level_count) {
            release(buffers, 9);
            PyErr_Format(PyExc_ValueError, "frontier holds %d, outside 0..%d", tuples_at[i],
                         level_count - 1);
            return NULL;
        }
    }
    double *drawn = malloc(sizeof(double) * (size_t)(paths + 1) * level_count);
    if (drawn == NULL) {
        release(buffers, 9);
        return PyErr_NoMemory();
    }
    const double *means = buffers[0].view.buf, *stddevs = buffers[1].view.buf;
    const double *risks = buffers[2].view.buf, *stalls = buffers[3].view.buf;
    const double *levels = buffers[4].view.buf, *highest = buffers[5].view.buf;
    double *bound = buffers[7].view.buf, *scale = buffers[8].view.buf;
    Py_BEGIN_ALLOW_THREADS;
    double *zeros = drawn + (size_t)paths * level_count; /* a path left out's values */
    for (int t = 0; t < level_count; t++) zeros[t] = 0.0;
    for (int row = 0; row < rows; row++)
        frontier_row(means + (size_t)row * paths, stddevs + (size_t)row * paths,
                     risks + (size_t)row * paths, stalls[row], levels, highest, tuples_at,
                     paths, level_count, tuples, drawn, zeros, bound + row, scale + row);
    Py_END_ALLOW_THREADS;
    free(drawn);
    release(buffers, 9);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"optimal", optimal, METH_VARARGS,
     "optimal(capacities, out, rows, paths, max_weight): optimal_weights_batch into out."},
    {"robust", robust, METH_VARARGS,
     "robust(means, stddevs, risks, stalls, normal, out, rows, paths, draws, max_weight, z, "
     "rank, candidate_draws): robust._robust_block into out."},
    {"scores", scores, METH_VARARGS,
     "scores(weights, means, stddevs, risks, stalls, normal, out, rows, sets, paths, draws, "
     "rank): robust.scores_many into out."},
    {"reach", reach, METH_VARARGS,
     "reach(means, stddevs, normal, out, rows, paths, draws, rank): robust.reach_many into "
     "out."},
    {"frontier", frontier, METH_VARARGS,
     "frontier(means, stddevs, risks, stalls, levels, highest, frontier, bound, scale, rows, "
     "paths, level_count, tuples): robust.frontier_bound_many into bound and scale."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_robust_core",
    "The robust policy's numerics in C (see xapp/policy/robust.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__robust_core(void) {
    PyObject *created = PyModule_Create(&module);
    if (created == NULL) return NULL;
    if (PyModule_AddIntConstant(created, "MAX_PATHS", MAX_PATHS) ||
        PyModule_AddIntConstant(created, "MAX_DRAWS", MAX_DRAWS) ||
        PyModule_AddStringConstant(created, "SOURCE_SHA256", SOURCE_SHA256)) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
