/* Max, average and global average pooling and their gradients (NCHW;
 * 1-D as H = 1). Geometry as for convolutions, with cout = cin. */
#ifndef ST_POOL_H
#define ST_POOL_H
#include "st_conv.h"

/* y = max over each window (pads excluded); idx (may be NULL) = the flat
 * index into x of the first maximum. */
/* n0, c0, channels: where a tile's planes sit in the whole tensor (see
 * st_pool_plane); all 0 when the kernel runs on the whole tensor. */
typedef struct { const float *x; float *y; int64_t *idx; st_geom g; int64_t n0, c0, channels; } st_maxpool_args;
void st_maxpool(void *args);

/* dx = 0, then dx[idx[i]] += dy[i]; indices lie in their own (n, c) plane. */
typedef struct { const float *dy; const int64_t *idx; float *dx; st_geom g; int64_t n0, c0, channels; } st_maxpool_grad_args;
void st_maxpool_grad(void *args);

/* The peer's MaxPoolGrad(dY, X): the argmax recomputed from X per window (the
 * first strict maximum in row-major window order, padded cells skipped),
 * overlapping windows adding into dX. */
typedef struct { const float *dy, *x; float *dx; st_geom g; } st_maxpool_grad_x_args;
void st_maxpool_grad_x(void *args);

/* y = mean over each window; the divisor counts the pads iff include_pad. */
typedef struct { const float *x; float *y; st_geom g; int include_pad; } st_avgpool_args;
void st_avgpool(void *args);

/* dx[i] = sum over the windows covering i of dy / (that window's divisor). */
typedef struct { const float *dy; float *dx; st_geom g; int include_pad; } st_avgpool_grad_args;
void st_avgpool_grad(void *args);

/* y[p] = mean of plane p of x (planes of hw elements). */
typedef struct { const float *x; float *y; int planes, hw; } st_gap_args;
void st_gap(void *args);

/* dx[p, i] = dy[p] / hw. */
typedef struct { const float *dy; float *dx; int planes, hw; } st_gap_grad_args;
void st_gap_grad(void *args);

#endif
