"""PCA on the agent: how long the Embeddings view's projection takes for many points.

    .venv/bin/python bench/pca_bench.py [--points 10000] [--dims 768] [--repeat 5]

Projects ``points`` × ``dims`` float32 representations (Gaussian with a decaying spectrum,
like a layer's pooled activations) onto two components with ``insight_views.pca`` (the
agent's), and with a full ``numpy.linalg.svd`` of the centred data for comparison; checks
that both give the same explained variance. Prints a Markdown table (median seconds).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tvis.agent import insight_views as iv


def _data(points: int, dims: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    spectrum = 1.0 / np.arange(1, dims + 1) ** 0.7
    return (rng.standard_normal((points, dims)) * spectrum).astype(np.float32)


def _svd_ratio(x: np.ndarray) -> np.ndarray:
    centred = x.astype(np.float64) - x.mean(axis=0)
    _, singular, _ = np.linalg.svd(centred, full_matrices=False)
    variance = singular**2
    return variance[:2] / variance.sum()


def _median_seconds(run, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10000)
    parser.add_argument("--dims", type=int, default=768)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    x = _data(args.points, args.dims)
    ours, (_, ratio) = _median_seconds(lambda: iv.pca(x), args.repeat)
    full, reference = _median_seconds(lambda: _svd_ratio(x), max(1, args.repeat // 2))
    np.testing.assert_allclose(ratio, reference, rtol=1e-4)
    print(f"| PCA of {args.points} × {args.dims} float32 | median s |")
    print("|---|---|")
    print(f"| agent (`insight_views.pca`: covariance + subspace iteration) | {ours:.3f} |")
    print(f"| full SVD of the centred data (reference) | {full:.3f} |")
    print(f"\nexplained variance of PC1, PC2: {ratio[0]:.4f}, {ratio[1]:.4f} (same as the SVD)")


if __name__ == "__main__":
    main()
