"""What recording a CTC batch's texts costs: ``ctc_decode.decoded`` (the best path of every
sample, its targets cut out) against the unreduced ``F.ctc_loss`` the recorder already
runs on the same batch, in CPU time of this thread, alternated rounds.

    .venv/bin/python bench/ctc_texts_bench.py [--batch 32] [--frames 800] [--rounds 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from tvis.record.ctc_decode import decoded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--frames", type=int, default=800)  # 8 s of audio at 10 ms hops
    parser.add_argument("--classes", type=int, default=29)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    b, t, c = args.batch, args.frames, args.classes
    log_probs = F.log_softmax(torch.randn(t, b, c), -1)
    target_lengths = torch.randint(t // 8, t // 4, (b,)).tolist()
    targets = torch.randint(1, c, (b, max(target_lengths)))
    input_lengths = torch.randint(t // 2, t + 1, (b,)).tolist()
    params = {
        "log_probs": log_probs,
        "targets": targets,
        "input_lengths": input_lengths,
        "target_lengths": target_lengths,
        "blank": 0,
    }
    texts, loss = [], []
    for _ in range(args.rounds):
        start = time.thread_time()
        decoded(params)
        texts.append(time.thread_time() - start)
        start = time.thread_time()
        F.ctc_loss(log_probs, targets, input_lengths, target_lengths, reduction="none")
        loss.append(time.thread_time() - start)
    tm, lm = statistics.median(texts) * 1e3, statistics.median(loss) * 1e3
    print(f"batch {b} × {t} frames × {c} classes, {args.rounds} rounds (median CPU ms)")
    print(f"texts (decoded)              {tm:8.2f}")
    print(f"unreduced ctc_loss (already) {lm:8.2f}")
    print(f"texts / loss                 {tm / lm:8.2f}")


if __name__ == "__main__":
    main()
