/* QK-norm + RoPE (fused.py's norm_rotate) in one pass over memory instead of PyTorch's seven.

   Tensors are float32 [B, H, T, D] with a contiguous last dimension; the other three dimensions come
   as strides in elements (`s[0..2]`), so the strided q and k views of the qkv projection and the
   broadcast cos and sin [B, 1, T, D/2] (stride 0 over heads) are read where they lie. Outputs are
   contiguous and fresh (`restrict`: no output overlaps an input; the row loops vectorize).

   The arithmetic is the PyTorch path's, operation for operation: a product is rounded where PyTorch
   rounds it, and fmaf stands where PyTorch's addcmul computes self + t1 * t2 with one rounding (its
   vector kernels are built with FMA contraction). Compiled with -ffp-contract=off, so the compiler
   adds no fusion of its own; cpu_kernels.py checks the result bit for bit before using it. */
#include <math.h>

#define ROW(p, s, b, h, t) ((p) + (b) * (s)[0] + (h) * (s)[1] + (t) * (s)[2])
#define EACH_ROW(n) \
    for (long b = 0; b < (n)[0]; b++) for (long h = 0; h < (n)[1]; h++) for (long t = 0; t < (n)[2]; t++)

/* out = rotate(x * rstd): y = x * rstd, out1 = y1 cos - y2 sin, out2 = y1 sin + y2 cos
   (halves i and i + D/2, as fused._rotate: mul, then addcmul_). */
static void rotate_row(long half, const float *restrict xr, float r, const float *restrict c,
                       const float *restrict s, float *restrict o) {
    for (long i = 0; i < half; i++) {
        float y1 = xr[i] * r, y2 = xr[i + half] * r;
        o[i] = fmaf(-y2, s[i], y1 * c[i]);
        o[i + half] = fmaf(y2, c[i], y1 * s[i]);
    }
}

void norm_rotate_forward(const long *n, const float *x, const long *xs, const float *rstd, const long *rs,
                         const float *cos, const long *cs, const float *sin, const long *ss, float *out) {
    EACH_ROW(n) {
        rotate_row(n[3] / 2, ROW(x, xs, b, h, t), *ROW(rstd, rs, b, h, t), ROW(cos, cs, b, h, t),
                   ROW(sin, ss, b, h, t), out + ((b * n[1] + h) * n[2] + t) * n[3]);
    }
}

/* The backward pass's first half. grad_y = the rotation back of grad (fused._rotate with -sin),
   and product = grad_y * y, whose row means PyTorch then takes (its reduction order is its own). */
static void rotate_back_row(long half, const float *restrict g, const float *restrict xr, float r,
                            const float *restrict c, const float *restrict s, float *restrict gy, float *restrict p) {
    for (long i = 0; i < half; i++) {
        float g1 = fmaf(g[i + half], s[i], g[i] * c[i]);
        float g2 = fmaf(g[i + half], c[i], -g[i] * s[i]);  /* g1 (-sin) is exactly -(g1 sin) */
        gy[i] = g1;
        gy[i + half] = g2;
        p[i] = g1 * (xr[i] * r);
        p[i + half] = g2 * (xr[i + half] * r);
    }
}

void norm_rotate_backward_rotate(const long *n, const float *grad, const long *gs, const float *x, const long *xs,
                                 const float *rstd, const long *rs, const float *cos, const long *cs,
                                 const float *sin, const long *ss, float *grad_y, float *product) {
    EACH_ROW(n) {
        long at = ((b * n[1] + h) * n[2] + t) * n[3];
        rotate_back_row(n[3] / 2, ROW(grad, gs, b, h, t), ROW(x, xs, b, h, t), *ROW(rstd, rs, b, h, t),
                        ROW(cos, cs, b, h, t), ROW(sin, ss, b, h, t), grad_y + at, product + at);
    }
}

/* The second half: grad_x = (grad_y - y * mean(grad_y * y)) * rstd (fused._RMSNorm.backward's
   addcmul, then mul_). grad_y and mean are contiguous, [B, H, T, D] and [B, H, T]. */
static void norm_back_row(long d, const float *restrict gy, const float *restrict xr, float r, float m,
                          float *restrict gx) {
    for (long i = 0; i < d; i++)
        gx[i] = fmaf(-(xr[i] * r), m, gy[i]) * r;
}

void norm_rotate_backward_norm(const long *n, const float *grad_y, const float *mean, const float *x,
                               const long *xs, const float *rstd, const long *rs, float *grad_x) {
    EACH_ROW(n) {
        long row = (b * n[1] + h) * n[2] + t;
        norm_back_row(n[3], grad_y + row * n[3], ROW(x, xs, b, h, t), *ROW(rstd, rs, b, h, t), mean[row],
                      grad_x + row * n[3]);
    }
}
