#!/usr/bin/env python3
"""Float32 error of Winograd F(m x m, 3x3) against a float64 convolution, at ResNet-20's 3x3 layers.

Why ember's CPU convolution is F(2x2, 3x3) and not F(4x4, 3x3) (Note [Winograd F(2x2, 3x3)] in
tensor/cpu/winograd_conv.cc): F(4x4) would do 2.25 multiplications per output instead of 4, but
its transforms' larger coefficients cost accuracy, and ember's float32 results are to stay closer
to float64 than PyTorch's (whose oneDNN convolutions are direct). Evaluated the way
winograd_conv.cc computes: the transformed kernel U rounded once from double, the input and output
transforms and the products in float32. Needs numpy (Debian's python3-numpy):
  /usr/bin/python3 scripts/winograd_error.py
"""
import numpy as np

# (name, m, interpolation points; the point at infinity is implied).
VARIANTS = [
    ("F(2x2) 0,+-1", 2, [0, 1, -1]),
    ("F(4x4) 0,+-1,+-2", 4, [0, 1, -1, 2, -2]),  # Lavin & Gray's
    ("F(4x4) 0,+-1/2,+-2", 4, [0, 0.5, -0.5, 2, -2]),
]
LAYERS = [(16, 28), (32, 14), (64, 7)]  # (channels, map size) of ResNet-20's three stages, padding 1


def transforms(m, points, r=3):
    """Cook-Toom matrices B^T [n, n], G [n, r], A^T [m, n], n = m + r - 1, from the points."""
    n = m + r - 1
    at, g = np.zeros((m, n)), np.zeros((n, r))
    for t, p in enumerate(points):
        at[:, t] = [p**k for k in range(m)]
        g[t] = [p**k / np.prod([p - q for q in points if q != p]) for k in range(r)]
    at[m - 1, n - 1] = g[n - 1, r - 1] = 1  # the point at infinity
    # B^T from the identity y_k = sum_i g_i d_(k+i) = sum_t A^T[k,t] (G g)_t (B^T d)_t, for all g, d.
    system = np.zeros((m * r * n, n * n))
    rhs = np.zeros(m * r * n)
    for row, (k, i, j) in enumerate(np.ndindex(m, r, n)):
        coefficients = np.zeros((n, n))
        coefficients[:, j] = at[k] * g[:, i]
        system[row], rhs[row] = coefficients.ravel(), float(j == k + i)
    bt = np.linalg.lstsq(system, rhs, rcond=None)[0].reshape(n, n)
    assert np.abs(system @ bt.ravel() - rhs).max() < 1e-9, "points give no exact transform"
    return bt, g, at


def conv_direct(x, w):
    """x [C, H+2, W+2] (padded), w [O, C, 3, 3] -> [O, H, W], in x's dtype."""
    _, hp, wp = x.shape
    y = np.zeros((w.shape[0], hp - 2, wp - 2), x.dtype)
    for i in range(3):
        for j in range(3):
            y += np.einsum("oc,chw->ohw", w[:, :, i, j], x[:, i:i + hp - 2, j:j + wp - 2])
    return y


def conv_winograd(x, w, m, points):
    bt, g, at = transforms(m, points)
    f32 = np.float32
    u = np.einsum("ai,ocij,bj->ocab", g, w.astype(float), g).astype(f32)  # rounded once
    bt, at = bt.astype(f32), at.astype(f32)
    c, hp, wp = x.shape
    ho, wo = hp - 2, wp - 2
    th, tw = -(-ho // m), -(-wo // m)
    padded = np.zeros((c, th * m + 2, tw * m + 2), f32)
    padded[:, :hp, :wp] = x
    y = np.zeros((w.shape[0], th * m, tw * m), f32)
    for ty in range(th):
        for tx in range(tw):
            d = padded[:, ty * m:ty * m + m + 2, tx * m:tx * m + m + 2]
            v = np.einsum("ai,cij,bj->cab", bt, d, bt)
            product = np.einsum("ocab,cab->oab", u, v)
            y[:, ty * m:ty * m + m, tx * m:tx * m + m] = np.einsum("ia,oab,jb->oij", at, product, at)
    return y[:, :ho, :wo]


def main():
    rng = np.random.default_rng(0)
    print("error against float64, float32 inputs (He-initialised weights, standard normal input);")
    print("rel_max = max |error| / max |output|, the quantity tests/tensor/nn_ops_test's")
    print("Conv2d.WinogradMatchesFloat64 bounds by 2e-6")
    print(f"{'layer':<10} {'algorithm':<20} {'max':>9} {'rms':>9} {'rel_max':>9} {'rms/direct':>10}")
    for channels, size in LAYERS:
        x = np.zeros((channels, size + 2, size + 2), np.float32)
        x[:, 1:-1, 1:-1] = rng.standard_normal((channels, size, size))
        w = (rng.standard_normal((channels, channels, 3, 3)) * np.sqrt(2 / (9 * channels))).astype(np.float32)
        reference = conv_direct(x.astype(float), w.astype(float))
        results = [("direct float32", conv_direct(x, w))]
        results += [(name, conv_winograd(x, w, m, points)) for name, m, points in VARIANTS]
        errors = [(name, np.abs(y.astype(float) - reference)) for name, y in results]
        direct_rms = np.sqrt((errors[0][1]**2).mean())
        for name, error in errors:
            rms = np.sqrt((error**2).mean())
            print(f"{channels:>3}x{size}x{size:<4} {name:<20} {error.max():9.2e} {rms:9.2e} "
                  f"{error.max() / np.abs(reference).max():9.2e} {rms / direct_rms:10.1f}")


if __name__ == "__main__":
    main()
