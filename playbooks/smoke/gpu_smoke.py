#!/usr/bin/env python3
"""incident-bot GPU smoke: a matmul, a device memory sweep and a host-to-device copy on every
GPU torch can see, one JSON line per GPU.

Run by the health gate's third level over SSH (``python3 - --incident-bot-smoke ...`` with this
text on stdin), with the host's own torch: nothing is installed. Usable by hand too:

    python3 gpu_smoke.py --incident-bot-smoke            # every visible GPU
    python3 gpu_smoke.py --device cpu --matmul-n 256 --mem-mib 64   # the same code on a CPU

Each line is ``{"smoke": 1, "gpu": 0, "uuid": ..., "matmul_tflops": ..., "mem_gbps": ...,
"h2d_gbps": ..., "mem_checked_gib": ..., "errors": [...]}``; a run that cannot start prints
``{"smoke": 1, "error": "..."}`` and exits 3; the last line is ``{"smoke": 1, "done": true}``.
The bot compares the figures with this node's last good run; this script only measures and
checks what it computed (finite results, a block checked in float32, every word of the
sweep read back).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

GIB = 1 << 30
MIB = 1 << 20


def emit(record: dict[str, Any]) -> None:
    print(json.dumps({"smoke": 1, **record}, sort_keys=True), flush=True)


def args_of(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--incident-bot-smoke", action="store_true", help="marks the bot's run")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--gpus", default="", help="comma-separated indexes (default: all)")
    p.add_argument("--matmul-n", type=int, default=8192)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--mem-fraction", type=float, default=0.8, help="of the free memory")
    p.add_argument("--mem-mib", type=int, default=0, help="sweep at most this much (0: fraction)")
    p.add_argument("--chunk-mib", type=int, default=256)
    p.add_argument("--h2d-mib", type=int, default=256)
    return p.parse_args(argv)


def sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def figure(value: float) -> float:
    """Four significant figures: a slow CPU's 0.0004 TFLOPS is not printed as 0."""
    return float(f"{value:.4g}")


def matmul(torch: Any, device: Any, n: int, iters: int, dtype: Any) -> tuple[float, list[str]]:
    """TFLOPS of ``n``×``n`` matmuls, and what was wrong with the result (if anything)."""
    gen = torch.Generator(device="cpu").manual_seed(36)
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    c = a @ b  # warm-up (kernels chosen, clocks up)
    sync(torch, device)
    start = time.perf_counter()
    for _ in range(iters):
        c = a @ b
    sync(torch, device)
    took = max(time.perf_counter() - start, 1e-9)
    errors = []
    if not bool(torch.isfinite(c).all()):
        errors.append("matmul produced NaN or Inf")
    k = min(n, 64)
    ref = a[:k].float() @ b[:, :k].float()
    rel = float((c[:k, :k].float() - ref).abs().max() / ref.abs().max().clamp(min=1e-6))
    if rel > 0.05:
        errors.append(f"matmul differs from float32 by {rel:.3f} (relative)")
    return 2 * n ** 3 * iters / took / 1e12, errors


def sweep(torch: Any, device: Any, budget: int, chunk: int) -> tuple[float, float, list[str]]:
    """Write a pattern to ``budget`` bytes of device memory in chunks, read every word back:
    GiB checked, GB/s (written + read), mismatches."""
    words = chunk // 4
    base = torch.arange(words, dtype=torch.int32, device=device)
    bufs: list[Any] = []
    try:
        while (len(bufs) + 1) * chunk <= budget:
            bufs.append(torch.empty(words, dtype=torch.int32, device=device))
    except RuntimeError:  # out of memory: sweep what was allocated
        pass
    sync(torch, device)
    start = time.perf_counter()
    for k, buf in enumerate(bufs):
        torch.add(base, k * 7919, out=buf)
    bad = 0
    for k, buf in enumerate(bufs):
        bad += int((buf - k * 7919).ne(base).sum())
    sync(torch, device)
    took = max(time.perf_counter() - start, 1e-9)
    checked = len(bufs) * chunk
    errors = [f"{bad} word(s) read back wrong in the memory sweep"] if bad else []
    del bufs
    return checked / GIB, 2 * checked / took / 1e9, errors


def h2d(torch: Any, device: Any, size: int) -> float:
    """Host-to-device copy GB/s from pinned memory (a downtrained PCIe link shows here)."""
    host = torch.empty(size // 4, dtype=torch.int32, pin_memory=device.type == "cuda")
    dev = torch.empty_like(host, device=device)
    dev.copy_(host, non_blocking=True)
    sync(torch, device)
    start = time.perf_counter()
    for _ in range(5):
        dev.copy_(host, non_blocking=True)
    sync(torch, device)
    return 5 * size / max(time.perf_counter() - start, 1e-9) / 1e9


def one(torch: Any, device: Any, index: int, opts: argparse.Namespace) -> dict[str, Any]:
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    started = time.perf_counter()
    record: dict[str, Any] = {"gpu": index, "device": str(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        record.update(name=props.name, uuid=str(getattr(props, "uuid", "") or ""),
                      memory_gib=round(props.total_memory / GIB, 1))
        free, _ = torch.cuda.mem_get_info(device)
        budget = int(free * opts.mem_fraction)
    else:
        record.update(name="cpu", uuid="")
        budget = opts.mem_mib * MIB or 64 * MIB
    if opts.mem_mib:
        budget = min(budget, opts.mem_mib * MIB)
    tflops, errors = matmul(torch, device, opts.matmul_n, opts.iters, dtypes[opts.dtype])
    chunk = max(min(opts.chunk_mib * MIB, budget), MIB)
    gib, gbps, mem_errors = sweep(torch, device, budget, chunk)
    copy = h2d(torch, device, opts.h2d_mib * MIB)
    record.update(matmul_tflops=figure(tflops), mem_checked_gib=round(gib, 2),
                  mem_gbps=figure(gbps), h2d_gbps=figure(copy),
                  errors=errors + mem_errors, seconds=round(time.perf_counter() - started, 2))
    return record


def main(argv: list[str]) -> int:
    opts = args_of(argv)
    try:
        import torch
    except ImportError as exc:
        emit({"error": f"torch is not importable here: {exc}"})
        return 3
    if opts.device == "cuda" and not torch.cuda.is_available():
        emit({"error": "torch sees no CUDA device (torch.cuda.is_available() is False)",
              "torch": torch.__version__})
        return 3
    count = torch.cuda.device_count() if opts.device == "cuda" else 1
    wanted = [int(g) for g in opts.gpus.split(",") if g.strip()] or list(range(count))
    failed = 0
    for index in wanted:
        device = torch.device("cuda", index) if opts.device == "cuda" else torch.device("cpu")
        try:
            record = one(torch, device, index, opts)
        except Exception as exc:  # a GPU that faults mid-run is this GPU's result
            record = {"gpu": index, "errors": [f"{type(exc).__name__}: {str(exc)[:300]}"]}
        failed += bool(record["errors"])
        emit(record)
        if opts.device == "cuda":
            torch.cuda.empty_cache()
    emit({"done": True, "gpus": len(wanted), "failed": failed, "torch": torch.__version__,
          "cuda": str(torch.version.cuda or "")})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
