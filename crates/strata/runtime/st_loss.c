#include "st_loss.h"

static long long st_label(const void *labels, int i32, int i) {
    return i32 ? (long long)((const int32_t *)labels)[i] : (long long)((const int64_t *)labels)[i];
}

static void st_log_softmax_row(const float *x, float *out, int c) {
    float m = x[0];
    for (int j = 1; j < c; j++)
        if (x[j] > m) m = x[j];
    float s = 0.0f;
    for (int j = 0; j < c; j++) s += expf(x[j] - m);
    float ls = logf(s);
    for (int j = 0; j < c; j++) out[j] = x[j] - m - ls;
}

/* Row weight (0 for an ignored row; 0 and a fault for a label outside
 * [0, c)) and the mean's denominator. */
static float st_row_weight(const void *labels, int i32, const float *weight, long long ignore, int c, int i) {
    long long l = st_label(labels, i32, i);
    if (l == ignore) return 0.0f;
    if (l < 0 || l >= c) {
        st_fault(ST_FAULT_LABEL);
        return 0.0f;
    }
    return weight ? weight[l] : 1.0f;
}

static float st_weight_total(const void *labels, int i32, const float *weight, long long ignore, int c, int b) {
    float t = 0.0f;
    for (int i = 0; i < b; i++) t += st_row_weight(labels, i32, weight, ignore, c, i);
    return t;
}

/* Small (b x c) and sequential in the batch: runs on core 0 so the loss sum has one order. */
void st_sce_loss(void *args) {
    const st_sce_loss_args *a = (const st_sce_loss_args *)args;
    if (st_core_id() != 0) return;
    st_psum sum;
    st_psum_init(&sum);
    for (int i = 0; i < a->b; i++) {
        float row[a->c];
        float *lp = a->logp ? a->logp + (size_t)i * a->c : row;
        st_log_softmax_row(a->x + (size_t)i * a->c, lp, a->c);
        float w = st_row_weight(a->labels, a->label_i32, a->weight, a->ignore_index, a->c, i);
        float per = w == 0.0f ? 0.0f : -w * lp[st_label(a->labels, a->label_i32, i)];
        if (a->reduction == 0) {
            if (a->loss) a->loss[i] = per;
        } else {
            st_psum_add(&sum, per);
        }
    }
    if (a->reduction != 0 && a->loss) {
        float acc = st_psum_total(&sum);
        if (a->reduction == 2) acc /= st_weight_total(a->labels, a->label_i32, a->weight, a->ignore_index, a->c, a->b);
        a->loss[0] = acc;
    }
}

void st_sce_loss_grad(void *args) {
    const st_sce_loss_grad_args *a = (const st_sce_loss_grad_args *)args;
    int nl = a->labels_n ? a->labels_n : a->b;
    float total = st_weight_total(a->labels, a->label_i32, a->weight, a->ignore_index, a->c, nl);
    size_t lo, hi;
    st_split((size_t)a->b, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        float d = a->dy ? (a->reduction == 0 ? a->dy[i] : a->dy[0]) : 1.0f;
        int r = a->row0 + (int)i;
        float w = st_row_weight(a->labels, a->label_i32, a->weight, a->ignore_index, a->c, r);
        float scale = a->reduction == 2 ? d * w / total : d * w;
        long long l = st_label(a->labels, a->label_i32, r);
        for (int j = 0; j < a->c; j++) {
            float onehot = (long long)j == l ? 1.0f : 0.0f;
            a->dx[i * (size_t)a->c + j] = (expf(a->logp[i * (size_t)a->c + j]) - onehot) * scale;
        }
    }
}

/* Sequential on core 0, in st_sce_loss's order: the same sum. */
void st_sce_loss_reduce(void *args) {
    const st_sce_loss_reduce_args *a = (const st_sce_loss_reduce_args *)args;
    if (st_core_id() != 0) return;
    st_psum sum;
    st_psum_init(&sum);
    for (int i = 0; i < a->b; i++) st_psum_add(&sum, a->per[i]);
    float acc = st_psum_total(&sum);
    if (a->reduction == 2) acc /= st_weight_total(a->labels, a->label_i32, a->weight, a->ignore_index, a->c, a->b);
    a->loss[0] = acc;
}

void st_mse_loss(void *args) {
    const st_mse_loss_args *a = (const st_mse_loss_args *)args;
    if (st_core_id() != 0) return;
    st_psum sum;
    st_psum_init(&sum);
    for (int i = 0; i < a->n; i++) {
        float d = a->p[i] - a->t[i];
        st_psum_add(&sum, d * d);
    }
    a->loss[0] = st_psum_total(&sum) / (float)(a->div ? a->div : a->n);
}

void st_mse_loss_grad(void *args) {
    const st_mse_loss_grad_args *a = (const st_mse_loss_grad_args *)args;
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) a->dp[i] = (a->p[i] - a->t[i]) * a->scale;
}
