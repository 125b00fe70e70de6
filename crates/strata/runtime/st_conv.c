#include "st_conv.h"

/* Rows (n, co, oy) of y, split over cores. */
void st_conv(void *args) {
    const st_conv_args *a = (const st_conv_args *)args;
    const st_geom *g = &a->g;
    int cig = g->cin / g->group, cog = g->cout / g->group;
    size_t lo, hi;
    st_split((size_t)g->n * (size_t)g->cout * (size_t)g->oh, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        int oy = (int)(r % (size_t)g->oh);
        int co = (int)((r / (size_t)g->oh) % (size_t)g->cout);
        int n = (int)(r / ((size_t)g->oh * (size_t)g->cout));
        int c0 = (co / cog) * cig;
        for (int ox = 0; ox < g->ow; ox++) {
            float acc = 0.0f;
            for (int ci = 0; ci < cig; ci++) {
                const float *xp = a->x + ((size_t)n * (size_t)g->cin + (size_t)(c0 + ci)) * (size_t)g->h * (size_t)g->w;
                const float *wp = a->w + ((size_t)co * (size_t)cig + (size_t)ci) * (size_t)g->kh * (size_t)g->kw;
                for (int ky = 0; ky < g->kh; ky++) {
                    int iy = oy * g->sh - g->pt + ky;
                    if (iy < 0 || iy >= g->h) continue;
                    for (int kx = 0; kx < g->kw; kx++) {
                        int ix = ox * g->sw - g->pl + kx;
                        if (ix < 0 || ix >= g->w) continue;
                        acc += xp[iy * g->w + ix] * wp[ky * g->kw + kx];
                    }
                }
            }
            if (a->b) acc += a->b[co];
            a->y[r * (size_t)g->ow + (size_t)ox] = acc;
        }
    }
}

/* Rows (n, c, iy) of dx, split over cores; each element gathers from the
 * outputs whose windows cover it. */
void st_conv_grad_x(void *args) {
    const st_conv_grad_x_args *a = (const st_conv_grad_x_args *)args;
    const st_geom *g = &a->g;
    int cig = g->cin / g->group, cog = g->cout / g->group;
    size_t lo, hi;
    st_split((size_t)g->n * (size_t)g->cin * (size_t)g->h, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        int iy = (int)(r % (size_t)g->h);
        int c = (int)((r / (size_t)g->h) % (size_t)g->cin);
        int n = (int)(r / ((size_t)g->h * (size_t)g->cin));
        int gi = c / cig, ci = c % cig;
        for (int ix = 0; ix < g->w; ix++) {
            float acc = 0.0f;
            for (int j = 0; j < cog; j++) {
                int co = gi * cog + j;
                const float *dyp = a->dy + ((size_t)n * (size_t)g->cout + (size_t)co) * (size_t)g->oh * (size_t)g->ow;
                const float *wp = a->w + ((size_t)co * (size_t)cig + (size_t)ci) * (size_t)g->kh * (size_t)g->kw;
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
                        acc += dyp[oy * g->ow + ox] * wp[ky * g->kw + kx];
                    }
                }
            }
            a->dx[r * (size_t)g->w + (size_t)ix] = acc;
        }
    }
}

/* Elements (co, ci, ky, kx) of dw, split over cores. */
void st_conv_grad_w(void *args) {
    const st_conv_grad_w_args *a = (const st_conv_grad_w_args *)args;
    const st_geom *g = &a->g;
    int cig = g->cin / g->group, cog = g->cout / g->group;
    size_t lo, hi;
    st_split((size_t)g->cout * (size_t)cig * (size_t)g->kh * (size_t)g->kw, &lo, &hi);
    for (size_t e = lo; e < hi; e++) {
        int kx = (int)(e % (size_t)g->kw);
        int ky = (int)((e / (size_t)g->kw) % (size_t)g->kh);
        int ci = (int)((e / ((size_t)g->kw * (size_t)g->kh)) % (size_t)cig);
        int co = (int)(e / ((size_t)g->kw * (size_t)g->kh * (size_t)cig));
        int c = (co / cog) * cig + ci;
        st_psum acc;
        st_psum_init(&acc);
        for (int n = 0; n < g->n; n++) {
            const float *dyp = a->dy + ((size_t)n * (size_t)g->cout + (size_t)co) * (size_t)g->oh * (size_t)g->ow;
            const float *xp = a->x + ((size_t)n * (size_t)g->cin + (size_t)c) * (size_t)g->h * (size_t)g->w;
            for (int oy = 0; oy < g->oh; oy++) {
                int iy = oy * g->sh - g->pt + ky;
                if (iy < 0 || iy >= g->h) continue;
                for (int ox = 0; ox < g->ow; ox++) {
                    int ix = ox * g->sw - g->pl + kx;
                    if (ix < 0 || ix >= g->w) continue;
                    st_psum_add(&acc, dyp[oy * g->ow + ox] * xp[iy * g->w + ix]);
                }
            }
        }
        a->dw[e] = st_psum_total(&acc);
    }
}

/* Output channels of db, split over cores. */
void st_conv_grad_b(void *args) {
    const st_conv_grad_b_args *a = (const st_conv_grad_b_args *)args;
    const st_geom *g = &a->g;
    size_t plane = (size_t)g->oh * (size_t)g->ow;
    size_t lo, hi;
    st_split((size_t)g->cout, &lo, &hi);
    for (size_t co = lo; co < hi; co++) {
        st_psum acc;
        st_psum_init(&acc);
        for (int n = 0; n < g->n; n++) {
            const float *dyp = a->dy + ((size_t)n * (size_t)g->cout + co) * plane;
            for (size_t i = 0; i < plane; i++) st_psum_add(&acc, dyp[i]);
        }
        a->db[co] = st_psum_total(&acc);
    }
}
