/* Data movement: strided copy (Transpose, Slice, Concat, Split), Gather, Pad. */
#ifndef ST_SHAPE_H
#define ST_SHAPE_H
#include "strata_rt.h"

/* Walk dims[0..rank) row-major; element i goes from src[off + sum i_d*ss[d]]
 * to dst[doff + sum i_d*ds[d]] (strides in elements, signed). esize 1, 4 or 8. */
typedef struct {
    const void *src;
    void *dst;
    int esize, rank, dims[8];
    long ss[8], off, ds[8], doff;
} st_copy_args;
void st_copy(void *args);

/* y[o, j, i] = x[o, idx[j], i] for x viewed as [outer, d, inner]; negative
 * indices count from the end; out-of-range ones give zero bytes. */
typedef struct {
    const void *x;
    const int64_t *idx;
    void *y;
    int esize, outer, d, nidx, inner;
} st_gather_args;
void st_gather(void *args);

/* mode: 0 constant (value), 1 reflect, 2 edge. pb: begin pads (may be negative). */
typedef struct {
    const float *x;
    float *y;
    int rank, odims[8], idims[8], istr[8], pb[8], mode;
    float value;
} st_pad_args;
void st_pad(void *args);

#endif
