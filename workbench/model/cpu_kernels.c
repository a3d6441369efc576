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

/* Matrix products with bits that follow from IEEE arithmetic alone (gemm.py's aten::mm and kin under
   portable numerics). C[M, N] = A[M, K] @ B[K, N] for `batch` products, each output element being
   the one chain

       acc = +0.0; for k = 0 .. K-1: acc = fma(A[i][k], B[k][j], acc)

   whatever the sizes, strides and tiling: one fused multiply-add per k, in increasing k, nothing
   reassociated. So the result is fixed by the inputs, the same on every CPU that has FMA, unlike a
   BLAS's, whose order of sums depends on its code branch (per CPU vendor and instruction set).

   A and B come with any element strides (row and column, and one per batch): transposed, sliced and
   broadcast (stride 0) views are read where they lie. C is contiguous, [batch, M, N]. */
#include <stdlib.h>
#include <string.h>

/* The defined chain, plainly: the reference the fast kernel must equal bit for bit (tests), and the
   kernel where the compiler targets no AVX2 (native numerics elsewhere; gemm.py never calls it
   there). */
void gemm_f32_reference(long batch, long m, long n, long k, const float *a, long sab, long sam, long sak,
                        const float *b, long sbb, long sbk, long sbn, float *c) {
    for (long p = 0; p < batch; p++)
        for (long i = 0; i < m; i++)
            for (long j = 0; j < n; j++) {
                float acc = 0.0f;
                for (long q = 0; q < k; q++)
                    acc = fmaf(a[p * sab + i * sam + q * sak], b[p * sbb + q * sbk + j * sbn], acc);
                c[(p * m + i) * n + j] = acc;
            }
}

/* float64: the same chain with fma, for the rare double products (correctness, not speed). The i, q,
   j order keeps each element's chain in increasing q while the inner loop runs along a row. */
int gemm_f64(long batch, long m, long n, long k, const double *a, long sab, long sam, long sak,
              const double *b, long sbb, long sbk, long sbn, double *c) {
    for (long p = 0; p < batch; p++)
        for (long i = 0; i < m; i++) {
            double *restrict row = c + (p * m + i) * n;
            for (long j = 0; j < n; j++)
                row[j] = 0.0;
            for (long q = 0; q < k; q++) {
                double x = a[p * sab + i * sam + q * sak];
                const double *bq = b + p * sbb + q * sbk;
                for (long j = 0; j < n; j++)
                    row[j] = fma(x, bq[j * sbn], row[j]);
            }
        }
    return 0;
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* GotoBLAS's blocking: B's [KC x NC] block packed into panels of NR columns, A's [MC x KC] block
   read in MR rows at a time, and an MR x NR tile of C held in 12
   ymm registers over KC steps. Blocking K is no reassociation: a tile's accumulators go to C after
   one K block and come back from it for the next, and a float32 store and load is exact, so each
   element's chain runs on unbroken. Zen 3 / Skylake-sized: a B panel (16 KiB) and A's MR rows
   (6 KiB) in L1, A's [MC x KC] block (144 KiB) in L2. */
enum { MR = 6, NR = 16, KC = 256, MC = 144, NC = 3072 };

/* C's tile (row stride ldc) += A's MR rows (offsets o[r] from a, k stride sak: read where they lie)
   times a packed B panel, over kc steps; `first`: from +0.0 instead of C (the chain's start). */
static void kernel_6x16(long kc, const float *a, const long *o, long sak, const float *restrict b, float *c, long ldc,
                        int first) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    long o1 = o[1], o2 = o[2], o3 = o[3], o4 = o[4], o5 = o[5];
    if (first) {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    } else {
        c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
        c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
        c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
    }
    for (long q = 0; q < kc; q++, a += sak, b += NR) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), x;
        x = _mm256_broadcast_ss(a);
        c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + o1);
        c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + o2);
        c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + o3);
        c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + o4);
        c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + o5);
        c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
    _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

/* A tile cut by C's edge (rows >= mr or columns >= nr outside C): computed whole in a padded tile,
   the missing rows reading A's first row again and the missing columns B's zero padding, so every
   valid element gets the same chain. */
static void kernel_edge(long kc, const float *a, const long *o, long sak, const float *b, float *c, long ldc,
                        long mr, long nr, int first) {
    float tile[MR * NR] __attribute__((aligned(32))) = {0};
    long rows[MR];
    for (long r = 0; r < MR; r++)
        rows[r] = r < mr ? o[r] : 0;
    if (!first)
        for (long r = 0; r < mr; r++)
            memcpy(tile + r * NR, c + r * ldc, nr * sizeof(float));
    kernel_6x16(kc, a, rows, sak, b, tile, NR, first);
    for (long r = 0; r < mr; r++)
        memcpy(c + r * ldc, tile + r * NR, nr * sizeof(float));
}

/* 8 x 8 floats transposed: rows of `in` (stride si) to columns of `out` (row stride so). */
static inline void transpose_8x8(const float *in, long si, float *out, long so) {
    __m256 r0 = _mm256_loadu_ps(in), r1 = _mm256_loadu_ps(in + si), r2 = _mm256_loadu_ps(in + 2 * si),
           r3 = _mm256_loadu_ps(in + 3 * si), r4 = _mm256_loadu_ps(in + 4 * si), r5 = _mm256_loadu_ps(in + 5 * si),
           r6 = _mm256_loadu_ps(in + 6 * si), r7 = _mm256_loadu_ps(in + 7 * si);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    r2 = _mm256_shuffle_ps(t1, t3, 0x44), r3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    r4 = _mm256_shuffle_ps(t4, t6, 0x44), r5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    r6 = _mm256_shuffle_ps(t5, t7, 0x44), r7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(out, _mm256_permute2f128_ps(r0, r4, 0x20));
    _mm256_storeu_ps(out + so, _mm256_permute2f128_ps(r1, r5, 0x20));
    _mm256_storeu_ps(out + 2 * so, _mm256_permute2f128_ps(r2, r6, 0x20));
    _mm256_storeu_ps(out + 3 * so, _mm256_permute2f128_ps(r3, r7, 0x20));
    _mm256_storeu_ps(out + 4 * so, _mm256_permute2f128_ps(r0, r4, 0x31));
    _mm256_storeu_ps(out + 5 * so, _mm256_permute2f128_ps(r1, r5, 0x31));
    _mm256_storeu_ps(out + 6 * so, _mm256_permute2f128_ps(r2, r6, 0x31));
    _mm256_storeu_ps(out + 7 * so, _mm256_permute2f128_ps(r3, r7, 0x31));
}

/* B[k0 .. k0+kc, j0 .. j0+nc] into ceil(nc / NR) panels, each k-major [kc][NR], zero-padded. A copy
   does not round, so packing changes no bit; it is vectorized because for a small M it is a good
   part of the product's time. */
static void pack_b(long kc, long nc, const float *b, long sbk, long sbn, float *restrict out) {
    for (long j = 0; j < nc; j += NR, out += kc * NR) {
        long w = nc - j < NR ? nc - j : NR;
        const float *src = b + j * sbn;
        if (w == NR && sbn == 1) {
            for (long q = 0; q < kc; q++) {
                _mm256_store_ps(out + q * NR, _mm256_loadu_ps(src + q * sbk));
                _mm256_store_ps(out + q * NR + 8, _mm256_loadu_ps(src + q * sbk + 8));
            }
            continue;
        }
        long q = 0;
        if (w == NR && sbk == 1)  /* a transposed B (a linear layer's weight): 8 x 8 blocks turned */
            for (; q + 8 <= kc; q += 8) {
                transpose_8x8(src + q, sbn, out + q * NR, NR);
                transpose_8x8(src + 8 * sbn + q, sbn, out + q * NR + 8, NR);
            }
        for (; q < kc; q++) {
            for (long x = 0; x < w; x++)
                out[q * NR + x] = src[q * sbk + x * sbn];
            for (long x = w; x < NR; x++)
                out[q * NR + x] = 0.0f;
        }
    }
}

/* B's packed block, one per thread (ctypes calls without the GIL), kept for the next product. */
static _Thread_local float *packed_b;
static _Thread_local size_t packed_b_size;

/* A is not packed: its MR rows are read where they lie (sequential along k for a row-major A, MR
   adjacent floats a step for a transposed one), which costs less than copying it (an A read once per
   B panel is cheap; a copy of an [M, K] A is a tenth of a product with N = 128). */
static int gemm_one(long m, long n, long k, const float *a, long sam, long sak, const float *b, long sbk, long sbn,
                    float *c) {
    if (k == 0) {
        memset(c, 0, m * n * sizeof(float));
        return 0;
    }
    long ncmax = n < NC ? n : NC, kcmax = k < KC ? k : KC;
    size_t floats = (size_t)kcmax * ((ncmax + NR - 1) / NR * NR);
    if (packed_b_size < floats) {
        free(packed_b);
        packed_b = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
        packed_b_size = packed_b ? floats : 0;
        if (!packed_b)
            return 1;
    }
    long o[MR];
    for (long r = 0; r < MR; r++)
        o[r] = r * sam;
    for (long j0 = 0; j0 < n; j0 += NC) {
        long nc = n - j0 < NC ? n - j0 : NC;
        for (long k0 = 0; k0 < k; k0 += KC) {
            long kc = k - k0 < KC ? k - k0 : KC;
            pack_b(kc, nc, b + k0 * sbk + j0 * sbn, sbk, sbn, packed_b);
            for (long i0 = 0; i0 < m; i0 += MC) {
                long mc = m - i0 < MC ? m - i0 : MC;
                for (long j = 0; j < nc; j += NR) {
                    long nr = nc - j < NR ? nc - j : NR;
                    for (long i = 0; i < mc; i += MR) {
                        long mr = mc - i < MR ? mc - i : MR;
                        float *tile = c + (i0 + i) * n + j0 + j;
                        const float *ap = a + (i0 + i) * sam + k0 * sak, *bp = packed_b + j * kc;
                        if (mr == MR && nr == NR)
                            kernel_6x16(kc, ap, o, sak, bp, tile, n, k0 == 0);
                        else
                            kernel_edge(kc, ap, o, sak, bp, tile, n, mr, nr, k0 == 0);
                    }
                }
            }
        }
    }
    return 0;
}

/* Returns 0, or 1 if the packing buffers could not be allocated (gemm.py raises MemoryError). */
int gemm_f32(long batch, long m, long n, long k, const float *a, long sab, long sam, long sak, const float *b,
             long sbb, long sbk, long sbn, float *c) {
    for (long p = 0; p < batch; p++)
        if (gemm_one(m, n, k, a + p * sab, sam, sak, b + p * sbb, sbk, sbn, c + p * m * n))
            return 1;
    return 0;
}
#else
int gemm_f32(long batch, long m, long n, long k, const float *a, long sab, long sam, long sak, const float *b,
             long sbb, long sbk, long sbn, float *c) {
    gemm_f32_reference(batch, m, n, k, a, sab, sam, sak, b, sbb, sbk, sbn, c);
    return 0;
}
#endif
