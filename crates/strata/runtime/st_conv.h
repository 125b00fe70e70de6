/* 2-D convolution (NCHW; 1-D as H = 1) and its gradients. */
#ifndef ST_CONV_H
#define ST_CONV_H
#include "strata_rt.h"

/* Window geometry shared by convolutions and pools. X is [n, cin, h, w],
 * Y is [n, cout, oh, ow]; a window has kh x kw taps with strides sh, sw,
 * starting pt rows above and pl columns left of the input. For a conv,
 * channels split into `group` groups (cin/group inputs, cout/group outputs
 * each); pools have cout = cin = group. */
typedef struct {
    int n, cin, h, w, cout, oh, ow, kh, kw, sh, sw, pt, pl, group;
} st_geom;

/* y = conv(x, w) + b (b may be NULL). w is [cout, cin/group, kh, kw]. */
typedef struct { const float *x, *w, *b; float *y; st_geom g; } st_conv_args;
void st_conv(void *args);

/* dx = gradient of conv w.r.t. x, from dy and w. */
typedef struct { const float *dy, *w; float *dx; st_geom g; } st_conv_grad_x_args;
void st_conv_grad_x(void *args);

/* dw = gradient of conv w.r.t. w, from dy and x. */
typedef struct { const float *dy, *x; float *dw; st_geom g; } st_conv_grad_w_args;
void st_conv_grad_w(void *args);

/* db[co] = sum of dy over batch and space. */
typedef struct { const float *dy; float *db; st_geom g; } st_conv_grad_b_args;
void st_conv_grad_b(void *args);

#endif
