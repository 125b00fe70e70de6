#include "st_pool.h"
#include <float.h>

/* The window of output (oy, ox) over the plane at `base`: the first strict
 * maximum in row-major window order, padded cells skipped. Returns its
 * offset in x (-1 for a window of padding only) and the maximum in *best
 * (-FLT_MAX then). MaxPool and MaxPoolGrad from (dY, X) share it, so the
 * gradient goes exactly where the forward pass took its maximum. */
static int64_t st_window_max(const st_geom *g, const float *x, size_t base, int oy, int ox,
                             float *best) {
    int64_t at = -1;
    *best = -FLT_MAX;
    for (int ky = 0; ky < g->kh; ky++) {
        int iy = oy * g->sh - g->pt + ky;
        if (iy < 0 || iy >= g->h) continue;
        for (int kx = 0; kx < g->kw; kx++) {
            int ix = ox * g->sw - g->pl + kx;
            if (ix < 0 || ix >= g->w) continue;
            size_t off = base + (size_t)iy * (size_t)g->w + (size_t)ix;
            if (x[off] > *best) {
                *best = x[off];
                at = (int64_t)off;
            }
        }
    }
    return at;
}

/* Plane p of a tile of (n, c) planes is plane (n0 + p / cin) * channels +
 * c0 + p % cin of the whole tensor (channels == 0: the tile is the tensor).
 * MaxPool's indices are flat over the whole input, as ONNX defines them, so
 * a tile writes and MaxPoolGrad reads them through this plane. */
static size_t st_pool_plane(size_t p, size_t cin, int64_t n0, int64_t c0, int64_t channels) {
    if (channels == 0) return p;
    return ((size_t)n0 + p / cin) * (size_t)channels + (size_t)c0 + p % cin;
}

/* Rows (n, c, oy) of y, split over cores. */
void st_maxpool(void *args) {
    const st_maxpool_args *a = (const st_maxpool_args *)args;
    const st_geom *g = &a->g;
    size_t lo, hi;
    st_split((size_t)g->n * (size_t)g->cin * (size_t)g->oh, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        int oy = (int)(r % (size_t)g->oh);
        size_t plane = r / (size_t)g->oh;
        size_t base = plane * (size_t)g->h * (size_t)g->w;
        for (int ox = 0; ox < g->ow; ox++) {
            float best;
            int64_t at = st_window_max(g, a->x, base, oy, ox, &best);
            a->y[r * (size_t)g->ow + (size_t)ox] = best;
            if (a->idx) {
                size_t gp = st_pool_plane(plane, (size_t)g->cin, a->n0, a->c0, a->channels);
                a->idx[r * (size_t)g->ow + (size_t)ox] =
                    at < 0 ? at : at - (int64_t)base + (int64_t)(gp * (size_t)g->h * (size_t)g->w);
            }
        }
    }
}

/* (n, c) planes, split over cores: a plane's indices point into its plane
 * of the whole tensor (st_pool_plane). */
void st_maxpool_grad(void *args) {
    const st_maxpool_grad_args *a = (const st_maxpool_grad_args *)args;
    const st_geom *g = &a->g;
    size_t in_plane = (size_t)g->h * (size_t)g->w, out_plane = (size_t)g->oh * (size_t)g->ow;
    size_t lo, hi;
    st_split((size_t)g->n * (size_t)g->cin, &lo, &hi);
    for (size_t p = lo; p < hi; p++) {
        size_t first = p * in_plane, last = first + in_plane;
        size_t gfirst = st_pool_plane(p, (size_t)g->cin, a->n0, a->c0, a->channels) * in_plane;
        for (size_t i = first; i < last; i++) a->dx[i] = 0.0f;
        for (size_t o = p * out_plane; o < (p + 1) * out_plane; o++) {
            int64_t at = a->idx[o];
            if (at < 0 || (size_t)at < gfirst || (size_t)at >= gfirst + in_plane) {
                st_fault(ST_FAULT_INDEX);
                continue;
            }
            a->dx[first + ((size_t)at - gfirst)] += a->dy[o];
        }
    }
}

/* (n, c) planes, split over cores, windows in st_maxpool's order. */
void st_maxpool_grad_x(void *args) {
    const st_maxpool_grad_x_args *a = (const st_maxpool_grad_x_args *)args;
    const st_geom *g = &a->g;
    size_t in_plane = (size_t)g->h * (size_t)g->w;
    size_t lo, hi;
    st_split((size_t)g->n * (size_t)g->cin, &lo, &hi);
    for (size_t p = lo; p < hi; p++) {
        size_t base = p * in_plane;
        for (size_t i = base; i < base + in_plane; i++) a->dx[i] = 0.0f;
        for (int oy = 0; oy < g->oh; oy++) {
            for (int ox = 0; ox < g->ow; ox++) {
                float best;
                int64_t at = st_window_max(g, a->x, base, oy, ox, &best);
                if (at >= 0)
                    a->dx[at] += a->dy[(p * (size_t)g->oh + (size_t)oy) * (size_t)g->ow + (size_t)ox];
            }
        }
    }
}

/* Valid taps [lo, hi) of a window starting at s of k over an axis of n. */
static int st_pool_span(int s, int k, int n) {
    int b = s < 0 ? 0 : s, e = s + k > n ? n : s + k;
    return e > b ? e - b : 0;
}

static float st_pool_div(const st_geom *g, int oy, int ox, int include_pad) {
    if (include_pad) return (float)(g->kh * g->kw);
    return (float)(st_pool_span(oy * g->sh - g->pt, g->kh, g->h) *
                   st_pool_span(ox * g->sw - g->pl, g->kw, g->w));
}

/* Rows (n, c, oy) of y, split over cores. */
void st_avgpool(void *args) {
    const st_avgpool_args *a = (const st_avgpool_args *)args;
    const st_geom *g = &a->g;
    size_t lo, hi;
    st_split((size_t)g->n * (size_t)g->cin * (size_t)g->oh, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        int oy = (int)(r % (size_t)g->oh);
        const float *xp = a->x + (r / (size_t)g->oh) * (size_t)g->h * (size_t)g->w;
        for (int ox = 0; ox < g->ow; ox++) {
            float acc = 0.0f;
            for (int ky = 0; ky < g->kh; ky++) {
                int iy = oy * g->sh - g->pt + ky;
                if (iy < 0 || iy >= g->h) continue;
                for (int kx = 0; kx < g->kw; kx++) {
                    int ix = ox * g->sw - g->pl + kx;
                    if (ix < 0 || ix >= g->w) continue;
                    acc += xp[iy * g->w + ix];
                }
            }
            a->y[r * (size_t)g->ow + (size_t)ox] = acc / st_pool_div(g, oy, ox, a->include_pad);
        }
    }
}

/* Rows (n, c, iy) of dx, split over cores; each element gathers. */
void st_avgpool_grad(void *args) {
    const st_avgpool_grad_args *a = (const st_avgpool_grad_args *)args;
    const st_geom *g = &a->g;
    size_t lo, hi;
    st_split((size_t)g->n * (size_t)g->cin * (size_t)g->h, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        int iy = (int)(r % (size_t)g->h);
        const float *dyp = a->dy + (r / (size_t)g->h) * (size_t)g->oh * (size_t)g->ow;
        for (int ix = 0; ix < g->w; ix++) {
            float acc = 0.0f;
            for (int ky = 0; ky < g->kh; ky++) {
                int ty = iy + g->pt - ky;
                if (ty < 0 || ty % g->sh != 0) continue;
                int oy = ty / g->sh;
                if (oy >= g->oh) continue;
                for (int kx = 0; kx < g->kw; kx++) {
                    int tx = ix + g->pl - kx;
                    if (tx < 0 || tx % g->sw != 0) continue;
                    int ox = tx / g->sw;
                    if (ox >= g->ow) continue;
                    acc += dyp[oy * g->ow + ox] / st_pool_div(g, oy, ox, a->include_pad);
                }
            }
            a->dx[r * (size_t)g->w + (size_t)ix] = acc;
        }
    }
}

void st_gap(void *args) {
    const st_gap_args *a = (const st_gap_args *)args;
    size_t lo, hi;
    st_split((size_t)a->planes, &lo, &hi);
    for (size_t p = lo; p < hi; p++) {
        const float *xp = a->x + p * (size_t)a->hw;
        st_psum sum;
        st_psum_init(&sum);
        for (int i = 0; i < a->hw; i++) st_psum_add(&sum, xp[i]);
        a->y[p] = st_psum_total(&sum) / (float)a->hw;
    }
}

void st_gap_grad(void *args) {
    const st_gap_grad_args *a = (const st_gap_grad_args *)args;
    size_t lo, hi;
    st_split((size_t)a->planes * (size_t)a->hw, &lo, &hi);
    for (size_t i = lo; i < hi; i++) a->dx[i] = a->dy[i / (size_t)a->hw] / (float)a->hw;
}
