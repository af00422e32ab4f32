#!/usr/bin/env python3
"""Measure a GPU the way trainbench's simulator describes one, with PyTorch (not trainbench).

Writes CSV files into OUTDIR, each section as soon as it is done (a run cut short keeps what
it finished):
  facts.txt        device, driver, clocks, PyTorch / CUDA / cuDNN versions
  e2e.csv          training steps of models trainbench has, as trainbench configs: median
                   step time over timed steps, the spread, peak memory
  profile.csv      GPU kernel time of a few of those steps by PyTorch operator (self time)
  conv.csv         ResNet-50's convolutions, forward / input grad / weight grad, per format
  gemm.csv         matrix products by shape and format
  norm.csv         batch norm at ResNet-50's shapes, layer norm and softmax at GPT-2's
  stream.csv       streaming kernels (copy, add, relu, batch norm, layer norm, softmax)
  launch.csv       per-operator cost: eager dispatch (host) and back-to-back kernels (graph)

The models mirror trainbench's builders (src/model/): torchvision's resnet50 (v1.5, as
trainbench's), the gpt family with its attention composed as trainbench composes it (scores
over s x s, additive causal mask, softmax, product with v) and, for comparison only,
PyTorch's fused scaled_dot_product_attention; ParaDnn's fc. Formats as trainbench names them
(src/simulate/accelerator_model.h): fp32 (no TF32), tf32, amp-fp16 (autocast + GradScaler),
amp-bf16 (autocast).

  align.csv        GEMMs with a dimension off a multiple of 8, and GPT-2's logits (vocab 50257)
  host.csv         tiny models' steps: the host's time and aten operators per step
  shapes.csv       one step's aten operators with dtypes and shapes, and their GPU time
  fp8gemm.csv      FP8 (torch._scaled_mm, e4m3) against bf16 matrix products, square and
                   at the fp8 rows' layer shapes
  fp8e2e.csv       training steps with the linear layers' GEMMs in FP8 (per-tensor current
                   scaling, e4m3 forward, e5m2 gradients: `amp-fp8@current`) beside the same
                   model in amp-bf16, in one process
  fp8profile.csv   GPU time by operator of two of those FP8 steps
  fp8cast.csv      each eager cast kernel (abs, amax, to fp32, multiply, cast, transposes)
                   alone at the fp8 rows' tensor shapes (added after the 2026-11-30 lease: not
                   measured yet)

Usage: measure_gpu.py OUTDIR [--smoke] [--sections facts,e2e,...] [--h200-batches]
                     [--e2e-set first|extra] [--fp8-cast eager|compiled] [--fp8-no-gemm]
  --smoke: tiny sizes on the CPU, to check the code. All sections write 8 files, the most the
  device tool brings back from $OUT: keep a log elsewhere, or run fewer sections.
The profile tables of 2026-11-27 (data/measured/) summed kernels twice in their
"(sum of self device time)" row; read their aten:: rows.
"""
import argparse
import csv
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ARGS = None
DEV = None


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


class Csv:
    def __init__(self, name, fields):
        self.f = open(os.path.join(ARGS.outdir, name), "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=fields)
        self.w.writeheader()
        self.f.flush()

    def row(self, **kw):
        self.w.writerow(kw)
        self.f.flush()


def sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def time_fn(fn, warmup, reps, per_call=True):
    """Times in ms. per_call: CUDA events around each call, the GPU idle between calls (for
    training steps, long enough that the host's dispatch hides behind the GPU). Otherwise
    one time per block of `reps` back-to-back calls, divided by reps: the host queues the
    next call while the GPU runs this one, as inside a training step. Timed per call, a
    kernel of 0.1-1 ms also counts the host's dispatch before it starts: this script's first
    tables (2026-11-27) measured ResNet-50's convolutions and batch norms 1.4-1.5x slower
    per call than the same kernels inside a step."""
    for _ in range(warmup):
        fn()
    sync()
    out = []
    if DEV.type != "cuda":
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e3)
        return out
    if not per_call:
        blocks = []
        for _ in range(3):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                fn()
            b.record()
            b.synchronize()
            blocks.append(a.elapsed_time(b) / reps)
        return blocks
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return out


def set_format(fmt):
    tf32 = fmt == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def half_of(fmt):
    return {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(fmt)


# --- models ---------------------------------------------------------------------------------


class GptBlock(nn.Module):
    def __init__(self, d, heads, ff, fused):
        super().__init__()
        self.h, self.fused = heads, fused
        self.norm1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def forward(self, x, mask):
        B, s, d = x.shape
        hd = d // self.h
        q, k, v = self.qkv(self.norm1(x)).split(d, -1)
        q, k, v = (t.view(B, s, self.h, hd).transpose(1, 2) for t in (q, k, v))
        if self.fused and hasattr(F, "scaled_dot_product_attention"):
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            q = q * (1 / math.sqrt(hd))
            ctx = torch.softmax(q @ k.transpose(-2, -1) + mask, -1) @ v
        x = x + self.out(ctx.transpose(1, 2).reshape(B, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, d, heads, seq, vocab, fused):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.layers = nn.ModuleList(GptBlock(d, heads, 4 * d, fused) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for b in self.layers:
            x = b(x, self.mask.to(x.dtype) if x.dtype != torch.float32 else self.mask)
        return F.linear(self.norm(x), self.embed.weight)  # tied


def fc_model(layers, nodes, inp, out):
    mods, w = [], inp
    for _ in range(layers):
        mods += [nn.Linear(w, nodes), nn.ReLU()]
        w = nodes
    mods.append(nn.Linear(w, out))
    return nn.Sequential(*mods)


def build(kind, p):
    """-> (model, optimizer factory, make batch, loss(model_out, target), examples per step)"""
    if kind == "resnet50":
        import torchvision

        m = torchvision.models.resnet50(num_classes=1000)
        x = torch.randn(p["batch"], 3, p["image"], p["image"])
        y = torch.randint(0, 1000, (p["batch"],))
        opt = lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)
        return m, opt, (x, y), F.cross_entropy, p["batch"]
    if kind == "gpt":
        m = Gpt(p["layers"], p["d_model"], p["heads"], p["seq"], p["vocab"], p.get("fused", False))
        # GPT-2's initialisation is irrelevant to speed; the default one keeps the loss finite.
        x = torch.randint(0, p["vocab"], (p["batch"], p["seq"]))
        y = torch.randint(0, p["vocab"], (p["batch"], p["seq"]))
        opt = lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.01)
        loss = lambda o, t: F.cross_entropy(o.reshape(-1, o.shape[-1]).float(), t.reshape(-1))
        return m, opt, (x, y), loss, p["batch"] * p["seq"]
    if kind == "fc":
        m = fc_model(p["layers"], p["nodes"], p["input"], p["output"])
        x = torch.randn(p["batch"], p["input"])
        y = torch.randint(0, p["output"], (p["batch"],))
        # ParaDnn's RMSProp (trainbench's default for fc): decay 0.9, momentum 0.9, eps 1.0.
        opt = lambda ps: torch.optim.RMSprop(ps, lr=1e-4, alpha=0.9, momentum=0.9, eps=1.0)
        return m, opt, (x, y), F.cross_entropy, p["batch"]
    raise ValueError(kind)


def _step_fn(model, opt, x, y, loss_f, fmt, scaler=None):
    """One training step as DeepLearningExamples runs it: autocast around the forward and the
    loss, GradScaler where fp16 needs one."""
    half = half_of(fmt)

    def step():
        opt.zero_grad(set_to_none=True)
        if half is not None:
            with torch.autocast(DEV.type, dtype=half if DEV.type == "cuda" else torch.bfloat16):
                loss = loss_f(model(x), y)
        else:
            loss = loss_f(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    return step


def train_steps(kind, p, fmt, layout, warmup, reps, profile_rows=None, tag="", model_hook=None):
    set_format(fmt)
    model, opt_f, (x, y), loss_f, examples = build(kind, p)
    model = model.to(DEV)
    if model_hook is not None:
        model = model_hook(model)
    x, y = x.to(DEV), y.to(DEV)
    if layout == "nhwc":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = opt_f(model.parameters())
    scaler = None
    if fmt == "amp-fp16" and DEV.type == "cuda":
        scaler = torch.amp.GradScaler("cuda")
    step = _step_fn(model, opt, x, y, loss_f, fmt, scaler)
    if DEV.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t = time_fn(step, warmup, reps)
    # Wall time of a block of steps too: events time the GPU's span of each step, the wall
    # clock includes any time the GPU waited for the host between steps.
    sync()
    w0 = time.perf_counter()
    for _ in range(reps):
        step()
    sync()
    wall = (time.perf_counter() - w0) * 1e3 / reps
    peak = torch.cuda.max_memory_allocated() / 2**30 if DEV.type == "cuda" else 0.0
    if profile_rows is not None:
        profile(step, profile_rows, tag)
    del model, opt, x, y
    if DEV.type == "cuda":
        torch.cuda.empty_cache()
    return t, wall, peak, examples


def profile(step, out, tag):
    from torch.profiler import ProfilerActivity, profile as prof

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV.type == "cuda" else [])
    steps = 3
    sync()
    w0 = time.perf_counter()
    with prof(activities=acts) as pr:
        for _ in range(steps):
            step()
        sync()
    wall = (time.perf_counter() - w0) * 1e3 / steps
    total = 0.0
    rows = []
    for e in pr.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:
            dev = getattr(e, "self_cuda_time_total", 0)
        if dev <= 0 and DEV.type == "cuda":
            continue
        if DEV.type != "cuda":
            dev = e.self_cpu_time_total
        rows.append((e.key, dev / 1e3 / steps, e.count // steps))
        # Kernels appear twice, as their own rows and in the self time of the aten operator
        # that launched them: the total counts the operators' rows only.
        if e.key.startswith("aten::"):
            total += dev / 1e3 / steps
    rows.sort(key=lambda r: -r[1])
    for k, ms, n in rows[:60]:
        out.row(run=tag, op=k, ms_per_step=f"{ms:.4f}", calls_per_step=n)
    out.row(run=tag, op="(sum of aten operators' self device time)", ms_per_step=f"{total:.4f}", calls_per_step="")
    out.row(run=tag, op="(wall per step, profiled)", ms_per_step=f"{wall:.4f}", calls_per_step="")


def e2e():
    w = Csv("e2e.csv", ["config", "model", "format", "layout", "attention", "batch",
                        "examples_per_step", "step_ms_median", "step_ms_min", "step_ms_max",
                        "wall_ms_per_step", "steps", "throughput_per_s", "peak_gib", "status"])
    prof = Csv("profile.csv", ["run", "op", "ms_per_step", "calls_per_step"])
    s = ARGS.smoke
    rn = dict(image=32 if s else 224, batch=4 if s else 256)
    gpt2 = dict(layers=2 if s else 12, d_model=64 if s else 768, heads=4 if s else 12,
                seq=32 if s else 1024, vocab=512 if s else 50257, batch=2 if s else 8)
    gptm = dict(gpt2, layers=2 if s else 24, d_model=64 if s else 1024, heads=4 if s else 16)
    fcb = dict(layers=4, nodes=64 if s else 8192, input=2000, output=1000,
               batch=16 if s else 2048)
    fcs = dict(layers=4, nodes=32 if s else 1024, input=2000, output=200, batch=16 if s else 512)
    runs = [
        # (kind, params, format, layout, profile?)
        ("resnet50", rn, "amp-fp16", "nhwc", True),
        ("resnet50", rn, "amp-fp16", "nchw", False),
        ("resnet50", rn, "amp-bf16", "nhwc", False),
        ("resnet50", rn, "tf32", "nchw", True),
        ("resnet50", rn, "fp32", "nchw", False),
        ("gpt", gpt2, "amp-bf16", "", True),
        ("gpt", dict(gpt2, fused=True), "amp-bf16", "", False),
        ("gpt", gpt2, "tf32", "", False),
        ("gpt", gptm, "amp-bf16", "", False),
        ("fc", fcb, "amp-bf16", "", False),
        ("fc", fcb, "tf32", "", False),
        ("fc", fcs, "tf32", "", True),
        ("fc", fcs, "amp-bf16", "", False),
    ]
    if ARGS.e2e_set == "extra":
        # Configs no model constant was set from, added after the first tables: the GPT rows'
        # vocabulary rounded up to a multiple of 64 (aligned logits), a second GPT shape, and
        # fc over widths and batches from host-bound to GPU-bound.
        gpta = dict(gpt2, vocab=512 if s else 50304)
        gpt6 = dict(layers=2 if s else 6, d_model=64 if s else 512, heads=4 if s else 8,
                    seq=32 if s else 512, vocab=512 if s else 32768, batch=2 if s else 16)
        runs = [("gpt", gpta, "amp-bf16", "", False), ("gpt", gpta, "tf32", "", False),
                ("gpt", dict(gptm, vocab=gpta["vocab"]), "amp-bf16", "", False),
                ("gpt", gpt6, "amp-bf16", "", False), ("gpt", gpt6, "tf32", "", False)]
        for nodes in ([32] if s else [512, 2048, 4096]):
            for batch in ([16] if s else [256, 2048]):
                for fmt in ["tf32", "amp-bf16"]:
                    runs.append(("fc", dict(layers=4, nodes=nodes, input=2000, output=200,
                                            batch=batch), fmt, "", False))
    elif not s:
        # The published Lambda rows' own batches (data/published): the same configs measured here.
        runs += [("resnet50", dict(rn, batch=640), "tf32", "nchw", False),
                 ("resnet50", dict(rn, batch=1280), "amp-fp16", "nchw", False)]
    if ARGS.h200_batches and ARGS.e2e_set != "extra":
        # Lambda's H200 rows' batches (twice the H100's), which need the H200's memory.
        runs += [("resnet50", dict(rn, batch=1280), "tf32", "nchw", False),
                 ("resnet50", dict(rn, batch=2560), "amp-fp16", "nchw", False)]
    for kind, p, fmt, layout, do_prof in runs:
        keys = {"resnet50": ["image", "batch"],
                "gpt": ["layers", "d_model", "heads", "seq", "vocab", "batch"],
                "fc": ["layers", "nodes", "input", "output", "batch"]}[kind]
        config = kind + ":" + ",".join(f"{k}={p[k]}" for k in keys)
        attention = ("fused" if p.get("fused") else "composed") if kind == "gpt" else ""
        tag = f"{config} {fmt} {layout or attention}".strip()
        big = kind == "resnet50" and p["batch"] > 256
        try:
            t, wall, peak, ex = train_steps(kind, p, fmt, layout, 3 if s else (5 if big else 8),
                                            3 if s else (6 if big else 20),
                                            prof if do_prof else None, tag)
            med = statistics.median(t)
            w.row(config=config, model=kind, format=fmt, layout=layout, attention=attention,
                  batch=p["batch"], examples_per_step=ex, step_ms_median=f"{med:.4f}",
                  step_ms_min=f"{min(t):.4f}", step_ms_max=f"{max(t):.4f}",
                  wall_ms_per_step=f"{wall:.4f}", steps=len(t),
                  throughput_per_s=f"{ex / med * 1e3:.1f}", peak_gib=f"{peak:.2f}", status="ok")
            log(f"e2e {tag}: {med:.3f} ms/step (wall {wall:.3f}), {ex / med * 1e3:.0f}/s, "
                f"{peak:.1f} GiB")
        except torch.cuda.OutOfMemoryError:
            w.row(config=config, model=kind, format=fmt, layout=layout, attention=attention,
                  batch=p["batch"], status="oom")
            log(f"e2e {tag}: oom")
            torch.cuda.empty_cache()
        except Exception as e:  # a failed config is a row, not the end of the run
            w.row(config=config, model=kind, format=fmt, layout=layout, attention=attention,
                  batch=p["batch"], status="crashed: " + repr(e)[:200])
            log(f"e2e {tag}: crashed {e!r}")


# --- FP8 training (per-tensor current scaling, HYBRID) ---------------------------------------

E4M3_MAX, E5M2_MAX = 448.0, 57344.0
# Which cast implementation the fp8 rows used: "compiled" (torch.compile fuses each amax and
# each scaled cast into one kernel, as Transformer Engine's kernels do) or "eager" (amax, the
# scale's multiply and the cast as separate aten kernels). Set by fp8_table's first check.
FP8 = {"cast": "eager", "compiled": None, "bias": True}


def _fp8_dtypes():
    """float8 dtypes, or (smoke test on a PyTorch without them) bf16 stand-ins: the layouts,
    scales and autograd plumbing are checked, not the numerics."""
    if hasattr(torch, "float8_e4m3fn"):
        return torch.float8_e4m3fn, torch.float8_e5m2
    return torch.bfloat16, torch.bfloat16


def _scaled_mm(a, b, sa, sb, out_dtype, fast, bias=None):
    """a row-major, b column-major (cuBLASLt's fp8 layout on Hopper: 'TN'), dims multiples of
    16; sa, sb: the inverse scales (float32, one element)."""
    if hasattr(torch, "_scaled_mm") and DEV.type == "cuda":
        if bias is not None and FP8["bias"]:
            try:
                return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, bias=bias,
                                        out_dtype=out_dtype, use_fast_accum=fast)
            except (RuntimeError, TypeError) as e:
                FP8["bias"] = False
                log(f"fp8: _scaled_mm refused a bias ({e!r:.160}); adding it separately")
        out = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=out_dtype,
                               use_fast_accum=fast)
        return out if bias is None else out + bias
    # CPU smoke test: the same layout checks cuBLASLt makes, then a float product.
    assert a.stride(1) == 1 and b.stride(0) == 1, (a.stride(), b.stride())
    assert all(d % 16 == 0 for d in (*a.shape, b.shape[1])), (a.shape, b.shape)
    out = (a.float() * sa) @ (b.float() * sb)
    return (out if bias is None else out + bias.float()).to(out_dtype)


def _quant_impl(x, dt, fmax):
    """Per-tensor current scaling: scale = fmax / amax(x), x8 = cast(x * scale), and x8's
    transposed copy (cuBLASLt's fp8 GEMMs take only the TN layout on Hopper, so each operand a
    backward GEMM reads the other way round needs one: Transformer Engine's cast-transpose)."""
    scale = fmax / torch.clamp(x.abs().amax().float(), min=1e-12)
    x8 = (x.float() * scale).to(dt)
    return x8, x8.t().contiguous(), scale


def _quant(x, dt, fmax):
    """-> x8, x8 transposed, the inverse scale the GEMM multiplies back. Compiled: one
    reduction kernel (amax) and fused cast(-transpose) kernels, as TE's; eager: abs, amax, the
    scale's arithmetic, a multiply, a cast and a transpose, each its own kernel."""
    fn = FP8["compiled"] if FP8["cast"] == "compiled" else _quant_impl
    x8, x8t, scale = fn(x.detach(), dt, fmax)  # detached: a Parameter would be its own guard
    return x8, x8t, scale.reciprocal()


class _Fp8Linear(torch.autograd.Function):
    """y = x W^T + b with the three GEMMs in FP8: x and W in e4m3 forward, dY in e5m2 backward
    (Transformer Engine's HYBRID format), each tensor scaled by its own amax this step
    (Float8CurrentScaling). Forward accumulates fast (TE's default for fprop), the backward
    GEMMs in split accumulation. The bias is added in the forward GEMM's epilogue."""

    @staticmethod
    def forward(ctx, x, w, b):
        e4, e5 = _fp8_dtypes()
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        x8, x8t, sx = _quant(x2, e4, E4M3_MAX)
        w8, w8t, sw = _quant(w, e4, E4M3_MAX)
        bias = b.to(torch.bfloat16) if b is not None else None  # rows run under amp-bf16
        y = _scaled_mm(x8, w8.t(), sx, sw, torch.bfloat16, True, bias)
        ctx.save_for_backward(x8t, sx, w8t, sw)
        ctx.has_bias, ctx.shape, ctx.wdtype, ctx.xdtype = b is not None, shape, w.dtype, x.dtype
        return y.reshape(*shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy):
        e4, e5 = _fp8_dtypes()
        x8t, sx, w8t, sw = ctx.saved_tensors
        g2 = gy.reshape(-1, gy.shape[-1])
        g8, g8t, sg = _quant(g2, e5, E5M2_MAX)
        # dX = dY W, W column-major; written in x's own dtype (autocast's fp32 residual stream).
        # Not for a first layer, whose input takes no gradient (the tables of 2026-11-30
        # computed it there: one fp8 GEMM more per fc step, under 1% of those steps).
        out = ctx.xdtype if ctx.xdtype in (torch.float32, torch.bfloat16) else torch.bfloat16
        dx = _scaled_mm(g8, w8t.t(), sg, sw, out, False) if ctx.needs_input_grad[0] else None
        # dW = dY^T X: dY^T row-major, X column-major.
        dw = _scaled_mm(g8t, x8t.t(), sg, sx, torch.float32, False)
        db = g2.sum(0, dtype=torch.float32) if ctx.has_bias else None
        dx = dx.reshape(ctx.shape).to(ctx.xdtype) if dx is not None else None
        return dx, dw.to(ctx.wdtype), db


class Fp8Linear(nn.Linear):
    def forward(self, x):
        return _Fp8Linear.apply(x, self.weight, self.bias)


def to_fp8(model):
    """Every nn.Linear whose features are multiples of 16 (cuBLASLt's fp8 requirement; TE's too)
    becomes an Fp8Linear with the same parameters; others stay as they are. The tied logits
    (F.linear on the embedding) stay in the half format, as TE's and Megatron's FP8 recipes
    leave the output layer. Returns the number converted."""
    n = 0
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            if type(child) is nn.Linear and child.in_features % 16 == 0 and \
                    child.out_features % 16 == 0:
                child.__class__ = Fp8Linear
                n += 1
    return n


def fp8_setup():
    """Chooses the cast implementation: torch.compile's fused kernels where they compile and
    agree with the eager ones, else eager. Checks one layer's three GEMMs against bf16."""
    FP8["cast"] = "eager"
    if ARGS.fp8_cast == "compiled" and hasattr(torch, "compile") and DEV.type == "cuda":
        try:
            import torch._dynamo as dynamo

            # Each (input dtype, fp8 dtype) pair compiles once; the default limit of 8 was hit
            # on 2026-11-30's first run, after which the casts ran eager.
            for k in ("recompile_limit", "cache_size_limit"):
                if hasattr(dynamo.config, k):
                    setattr(dynamo.config, k, 64)
            fn = torch.compile(_quant_impl, dynamic=True)
            x = torch.randn(256, 512, device=DEV, dtype=torch.bfloat16) * 3
            e4, _ = _fp8_dtypes()
            a8, a8t, sa = fn(x, e4, E4M3_MAX)
            b8, b8t, _ = _quant_impl(x, e4, E4M3_MAX)
            diff = max((a8.float() - b8.float()).abs().max().item(),
                       (a8t.float() - b8t.float()).abs().max().item())
            log(f"fp8: compiled cast vs eager, max difference {diff:.3g}, scale {sa.item():.4g}")
            FP8["compiled"], FP8["cast"] = fn, "compiled"
        except Exception as e:  # eager casts still measure the recipe, with more kernels
            log(f"fp8: torch.compile of the cast failed ({e!r:.300}); eager casts")
    # One layer, fp8 against bf16, relative errors of y, dx, dW.
    lin = nn.Linear(512, 768).to(DEV)
    ref = nn.Linear(512, 768).to(DEV)
    ref.load_state_dict(lin.state_dict())
    to_fp8(nn.Sequential(lin))
    x = torch.randn(64, 512, device=DEV, requires_grad=True)
    xr = x.detach().clone().requires_grad_(True)
    with torch.autocast(DEV.type, dtype=torch.bfloat16):
        y, yr = lin(x), ref(xr)
    g = torch.randn_like(yr.float())
    y.float().backward(g)
    yr.float().backward(g)
    rel = lambda a, b: ((a.float() - b.float()).norm() / b.float().norm()).item()
    errs = (rel(y, yr), rel(x.grad, xr.grad), rel(lin.weight.grad, ref.weight.grad),
            rel(lin.bias.grad, ref.bias.grad))
    log(f"fp8: one layer against bf16, relative error y {errs[0]:.4f} dx {errs[1]:.4f} "
        f"dW {errs[2]:.4f} db {errs[3]:.4f} (cast {FP8['cast']}, bias in GEMM {FP8['bias']})")
    if not all(math.isfinite(e) and e < 0.2 for e in errs):
        raise RuntimeError(f"fp8 layer disagrees with bf16: {errs}")
    return errs


def fp8_table():
    """Training steps with every eligible linear layer's GEMMs in FP8 (per-tensor current
    scaling, e4m3 forward, e5m2 gradients) against the same model in amp-bf16, in this process;
    the FP8 and bf16 GEMMs at the same shapes; one profiled FP8 step."""
    s = ARGS.smoke
    errs = fp8_setup()
    gw = Csv("fp8gemm.csv", ["case", "format", "m", "n", "k", "ms", "tflops"])
    e4, e5 = _fp8_dtypes()
    shapes = [("square", n, n, n) for n in ([64, 128] if s else [1024, 2048, 4096, 8192, 16384])]
    if ARGS.fp8_no_gemm:
        shapes = []
    shapes += [] if s else [("gpt2 qkv", 8192, 2304, 768), ("gpt2 fc1", 8192, 3072, 768),
                            ("gpt2 fc2", 8192, 768, 3072), ("gpt2 out", 8192, 768, 768),
                            ("gpt 2048 fc1", 8192, 8192, 2048), ("gpt 2048 fc2", 8192, 2048, 8192),
                            ("fc 8192", 2048, 8192, 8192)]
    one = torch.ones((), device=DEV)
    for case, m, n, k in shapes:
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
        a8, b8 = a.to(e4), b.to(e4)
        for fmt, fn in [("bf16", lambda: a @ b.t()),
                        ("e4m3 fast", lambda: _scaled_mm(a8, b8.t(), one, one, torch.bfloat16, True)),
                        ("e4m3", lambda: _scaled_mm(a8, b8.t(), one, one, torch.bfloat16, False))]:
            t = statistics.median(time_fn(fn, 2, 3 if s else 10, per_call=False))
            gw.row(case=case, format=fmt, m=m, n=n, k=k, ms=f"{t:.5f}",
                   tflops=f"{2.0 * m * n * k / t / 1e9:.2f}")
        del a, b, a8, b8
    log("fp8 gemm done")
    # Each eager cast kernel alone, back to back, at the fp8 rows' tensor shapes: what the
    # simulator's per-element bytes of amp-fp8-eager@current assume they stream at.
    cw = Csv("fp8cast.csv", ["kernel", "dtype", "rows", "cols", "bytes", "ms", "gbps"])
    for rows_, cols in ([(64, 32)] if s else [(8192, 768), (8192, 3072), (8192, 2048),
                                              (8192, 8192)]):
        for dt in [torch.float32, torch.bfloat16]:
            x = torch.randn(rows_, cols, device=DEV, dtype=dt)
            n, b = rows_ * cols, torch.finfo(dt).bits // 8
            xf = x.float()
            scale = torch.tensor(3.0, device=DEV)
            x8 = (xf * scale).to(e4)
            cases = [("abs", lambda: x.abs(), 2 * n * b),
                     ("abs then amax", lambda: x.abs().amax(), 3 * n * b),
                     ("to fp32", lambda: x.float(), n * (b + 4) if b < 4 else 0),
                     ("multiply fp32", lambda: xf * scale, 8 * n),
                     ("cast to e4m3", lambda: xf.to(e4), 5 * n),
                     ("transpose e4m3", lambda: x8.t().contiguous(), 2 * n),
                     ("transpose " + str(dt).replace("torch.", ""), lambda: x.t().contiguous(),
                      2 * n * b),
                     ("eager quant (all)", lambda: _quant_impl(x, e4, E4M3_MAX), 0)]
            for name, fn, by in cases:
                if name == "to fp32" and b == 4:
                    continue  # x.float() of an fp32 tensor is the tensor itself
                t = statistics.median(time_fn(fn, 3, 5 if s else 20, per_call=False))
                cw.row(kernel=name, dtype=str(dt).replace("torch.", ""), rows=rows_, cols=cols,
                       bytes=by, ms=f"{t:.5f}", gbps=f"{by / t / 1e6:.1f}" if by else "")
            del x, xf, x8
    log("fp8 cast kernels done")
    w = Csv("fp8e2e.csv", ["config", "model", "format", "cast", "fp8_layers", "batch",
                           "examples_per_step", "step_ms_median", "step_ms_min", "step_ms_max",
                           "wall_ms_per_step", "steps", "throughput_per_s", "peak_gib",
                           "check_rel_err", "status"])
    prof = Csv("fp8profile.csv", ["run", "op", "ms_per_step", "calls_per_step"])
    gpt2 = dict(layers=2 if s else 12, d_model=64 if s else 768, heads=4 if s else 12,
                seq=32 if s else 1024, vocab=512 if s else 50304, batch=2 if s else 8)
    runs = [("gpt", gpt2, True),
            ("gpt", dict(gpt2, layers=2 if s else 24, d_model=64 if s else 1024,
                         heads=4 if s else 16), False),
            ("gpt", dict(layers=2 if s else 6, d_model=64 if s else 512, heads=4 if s else 8,
                         seq=32 if s else 512, vocab=512 if s else 32768, batch=2 if s else 16), False),
            ("gpt", dict(gpt2, layers=2 if s else 16, d_model=64 if s else 2048,
                         heads=4 if s else 16), True),
            ("fc", dict(layers=4, nodes=64 if s else 8192, input=2000, output=1000,
                        batch=16 if s else 2048), False),
            ("fc", dict(layers=4, nodes=64 if s else 2048, input=2000, output=1008,
                        batch=16 if s else 8192), False)]
    keys = {"gpt": ["layers", "d_model", "heads", "seq", "vocab", "batch"],
            "fc": ["layers", "nodes", "input", "output", "batch"]}
    for kind, p, do_prof in runs:
        config = kind + ":" + ",".join(f"{k}={p[k]}" for k in keys[kind])
        # bf16 first, then fp8, back to back in this process; GPT-2 small's fp8 again with
        # eager casts, to show what fusing the casts is worth.
        variants = [("amp-bf16", ""), ("amp-fp8@current", FP8["cast"])]
        if do_prof and kind == "gpt" and p["d_model"] == gpt2["d_model"] and FP8["cast"] != "eager":
            variants.append(("amp-fp8@current", "eager"))
        for fmt, cast in variants:
            tag = f"{config} {fmt} {cast}".strip()
            chosen = FP8["cast"]
            FP8["cast"] = cast or chosen
            conv = [0]

            def hook(model):
                if fmt != "amp-bf16":
                    conv[0] = to_fp8(model)
                return model

            try:
                t, wall, peak, ex = train_steps(kind, p, "amp-bf16", "", 3 if s else 8,
                                                3 if s else 20,
                                                prof if (do_prof and cast == chosen and cast) else None,
                                                tag, model_hook=hook)
                med = statistics.median(t)
                w.row(config=config, model=kind, format=fmt, cast=cast, fp8_layers=conv[0],
                      batch=p["batch"], examples_per_step=ex, step_ms_median=f"{med:.4f}",
                      step_ms_min=f"{min(t):.4f}", step_ms_max=f"{max(t):.4f}",
                      wall_ms_per_step=f"{wall:.4f}", steps=len(t),
                      throughput_per_s=f"{ex / med * 1e3:.1f}", peak_gib=f"{peak:.2f}",
                      check_rel_err=" ".join(f"{e:.4f}" for e in errs), status="ok")
                log(f"fp8 {tag}: {med:.3f} ms/step (wall {wall:.3f}), {ex / med * 1e3:.0f}/s, "
                    f"{peak:.1f} GiB, {conv[0]} fp8 layers")
            except torch.cuda.OutOfMemoryError:
                w.row(config=config, model=kind, format=fmt, batch=p["batch"], status="oom")
                log(f"fp8 {tag}: oom")
                torch.cuda.empty_cache()
            except Exception as e:  # a failed config is a row, not the end of the run
                w.row(config=config, model=kind, format=fmt, batch=p["batch"],
                      status="crashed: " + repr(e)[:200])
                log(f"fp8 {tag}: crashed {e!r}")
            FP8["cast"] = chosen


# --- kernels --------------------------------------------------------------------------------

# ResNet-50 v1.5's convolutions (torchvision): (in, out, kernel, stride, input side, count).
def resnet50_convs(image):
    convs = [(3, 64, 7, 2, image, 1)]
    side = image // 4
    inp = 64
    for stage, (planes, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            convs.append((inp, planes, 1, 1, side, 1))
            convs.append((planes, planes, 3, stride, side, 1))
            side_out = side // stride
            convs.append((planes, 4 * planes, 1, 1, side_out, 1))
            if b == 0:
                convs.append((inp, 4 * planes, 1, stride, side, 1))
            inp, side = 4 * planes, side_out
    merged = {}
    for c in convs:
        merged[c[:5]] = merged.get(c[:5], 0) + 1
    return [k + (n,) for k, n in merged.items()]


def conv_table():
    w = Csv("conv.csv", ["format", "layout", "batch", "c_in", "c_out", "kernel", "stride",
                         "side_in", "side_out", "count_in_resnet50", "pass", "flops", "ms",
                         "tflops"])
    s = ARGS.smoke
    batch, image = (2, 32) if s else (256, 224)
    cases = [("amp-fp16", "nhwc"), ("amp-bf16", "nhwc"), ("tf32", "nchw"), ("amp-fp16", "nchw")]
    if s:
        cases = [("fp32", "nchw")]
    for fmt, layout in cases:
        set_format(fmt)
        dt = half_of(fmt) or torch.float32
        for ci, co, k, st, side, n in resnet50_convs(image):
            pad = k // 2
            x = torch.randn(batch, ci, side, side, device=DEV, dtype=dt)
            wt = torch.randn(co, ci, k, k, device=DEV, dtype=dt) * 0.01
            if layout == "nhwc":
                x = x.contiguous(memory_format=torch.channels_last)
                wt = wt.contiguous(memory_format=torch.channels_last)
            y = F.conv2d(x, wt, None, st, pad)
            gy = torch.randn_like(y)
            so = y.shape[-1]
            flops = 2.0 * batch * co * so * so * ci * k * k
            bw = lambda mask: torch.ops.aten.convolution_backward(
                gy, x, wt, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1, mask)
            passes = [("forward", lambda: F.conv2d(x, wt, None, st, pad)),
                      ("backward-input", lambda: bw([True, False, False])),
                      ("backward-weight", lambda: bw([False, True, False]))]
            for name, fn in passes:
                if name == "backward-input" and ci == 3:
                    continue  # the first layer's input gradient is never computed
                t = statistics.median(time_fn(fn, 2, 3 if s else 10, per_call=False))
                w.row(format=fmt, layout=layout, batch=batch, c_in=ci, c_out=co, kernel=k,
                      stride=st, side_in=side, side_out=so, count_in_resnet50=n,
                      **{"pass": name}, flops=f"{flops:.4g}", ms=f"{t:.5f}",
                      tflops=f"{flops / t / 1e9:.2f}")
            del x, wt, y, gy
        log(f"conv {fmt} {layout} done")


# ResNet-50's batch norms at batch 256: (channels, side, count), from its convolutions' outputs.
def resnet50_norms(image):
    out = {}
    for ci, co, k, st, side, n in resnet50_convs(image):
        so = side // st
        out[(co, so)] = out.get((co, so), 0) + n
    return [k + (n,) for k, n in out.items()]


def norm_table():
    """Normalisation and softmax kernels at the shapes the models run them, forward and
    forward + backward (autograd), with the bytes a streaming model would count."""
    w = Csv("norm.csv", ["kernel", "dtype", "layout", "shape", "count", "pass", "bytes", "ms",
                         "gbps"])
    s = ARGS.smoke
    batch, image = (2, 32) if s else (256, 224)
    cases = [(torch.float16 if not s else torch.bfloat16, "nhwc"), (torch.float32, "nchw")]
    for dt, layout in cases:
        es = torch.finfo(dt).bits // 8
        for c, side, n in resnet50_norms(image):
            x = torch.randn(batch, c, side, side, device=DEV, dtype=dt)
            if layout == "nhwc":
                x = x.contiguous(memory_format=torch.channels_last)
            x.requires_grad_(True)
            wt = torch.ones(c, device=DEV, requires_grad=True)
            b = torch.zeros(c, device=DEV, requires_grad=True)
            rm, rv = torch.zeros(c, device=DEV), torch.ones(c, device=DEV)
            gy = torch.randn_like(x)
            fwd = lambda: F.batch_norm(x, rm, rv, wt, b, True)
            both = lambda: torch.autograd.grad(F.batch_norm(x, rm, rv, wt, b, True), [x, wt, b],
                                               gy)
            e = x.numel() * es
            # forward: read x twice (statistics, then normalise), write y; backward: read x,
            # dy twice and write dx
            for name, fn, by in [("forward", fwd, 3 * e), ("forward+backward", both, 8 * e)]:
                t = statistics.median(time_fn(fn, 3, 3 if s else 10, per_call=False))
                w.row(kernel="batchnorm_train", dtype=str(dt).replace("torch.", ""),
                      layout=layout, shape=f"{batch}x{c}x{side}x{side}", count=n,
                      **{"pass": name}, bytes=by, ms=f"{t:.5f}", gbps=f"{by / t / 1e6:.1f}")
            del x, gy
    # GPT-2 small's layer norm and attention softmax (batch 8, seq 1024, 12 heads)
    B, S, D, H = (2, 32, 64, 4) if s else (8, 1024, 768, 12)
    for dt in [torch.bfloat16, torch.float32]:
        es = torch.finfo(dt).bits // 8
        x = torch.randn(B, S, D, device=DEV, dtype=dt, requires_grad=True)
        ln = nn.LayerNorm(D).to(DEV, dt)
        gy = torch.randn_like(x)
        z = torch.randn(B, H, S, S, device=DEV, dtype=dt, requires_grad=True)
        gz = torch.randn_like(z)
        for kern, shape, fwd, both, e in [
            ("layernorm", f"{B}x{S}x{D}", lambda: ln(x),
             lambda: torch.autograd.grad(ln(x), [x] + list(ln.parameters()), gy), x.numel() * es),
            ("softmax", f"{B}x{H}x{S}x{S}", lambda: torch.softmax(z, -1),
             lambda: torch.autograd.grad(torch.softmax(z, -1), [z], gz), z.numel() * es)]:
            for name, fn, by in [("forward", fwd, 2 * e), ("forward+backward", both, 6 * e)]:
                t = statistics.median(time_fn(fn, 3, 3 if s else 10, per_call=False))
                w.row(kernel=kern, dtype=str(dt).replace("torch.", ""), layout="", shape=shape,
                      count="", **{"pass": name}, bytes=by, ms=f"{t:.5f}",
                      gbps=f"{by / t / 1e6:.1f}")
        del x, z, gy, gz
    log("norm done")


def gemm_table():
    w = Csv("gemm.csv", ["format", "m", "n", "k", "ms", "tflops"])
    sizes = [64, 128] if ARGS.smoke else [256, 1024, 2048, 4096, 8192]
    for fmt in ["amp-bf16", "tf32", "fp32"] + ([] if ARGS.smoke else ["amp-fp16"]):
        set_format(fmt)
        dt = half_of(fmt) or torch.float32
        for m in sizes:
            for n in sizes:
                for k in sizes:
                    a = torch.randn(m, k, device=DEV, dtype=dt)
                    b = torch.randn(k, n, device=DEV, dtype=dt)
                    t = statistics.median(time_fn(lambda: a @ b, 2, 3 if ARGS.smoke else 10, per_call=False))
                    w.row(format=fmt, m=m, n=n, k=k, ms=f"{t:.5f}",
                          tflops=f"{2.0 * m * n * k / t / 1e9:.2f}")
        log(f"gemm {fmt} done")


def stream_table():
    w = Csv("stream.csv", ["kernel", "dtype", "elements", "bytes", "ms", "gbps"])
    exps = [14, 16] if ARGS.smoke else [18, 20, 22, 24, 26, 28]
    for dt in [torch.bfloat16 if ARGS.smoke else torch.float16, torch.float32]:
        es = torch.finfo(dt).bits // 8
        for e in exps:
            n = 1 << e
            a = torch.randn(n, device=DEV, dtype=dt)
            b = torch.randn(n, device=DEV, dtype=dt)
            c = 64
            x4 = a.view(-1, c, 16, 16)  # n is a multiple of 64 x 256
            x4 = x4.contiguous(memory_format=torch.channels_last)
            rw, ln_w = torch.ones(c, device=DEV), torch.ones(1024, device=DEV, dtype=dt)
            rm, rv = torch.zeros(c, device=DEV), torch.ones(c, device=DEV)
            x2 = a.view(-1, 1024)
            cases = [
                ("copy", lambda: a.clone(), 2 * n * es),
                ("add", lambda: a + b, 3 * n * es),
                ("relu", lambda: torch.relu(a), 2 * n * es),
                # training batch norm: read for the statistics, read again and write
                ("batchnorm_train_nhwc", lambda: F.batch_norm(x4, rm, rv, rw, None, True),
                 3 * x4.numel() * es),
                ("layernorm", lambda: F.layer_norm(x2, (x2.shape[-1],), ln_w[: x2.shape[-1]]),
                 2 * n * es),
                ("softmax", lambda: torch.softmax(x2, -1), 2 * n * es),
            ]
            for name, fn, by in cases:
                t = statistics.median(time_fn(fn, 3, 5 if ARGS.smoke else 20, per_call=False))
                w.row(kernel=name, dtype=str(dt).replace("torch.", ""), elements=n, bytes=by,
                      ms=f"{t:.5f}", gbps=f"{by / t / 1e6:.1f}")
            del a, b, x4, x2
    log("stream done")


def launch_table():
    w = Csv("launch.csv", ["what", "ops", "us_per_op"])
    x = torch.zeros(1, device=DEV)
    n = 200 if ARGS.smoke else 5000
    for _ in range(100):
        x.add_(1)
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    sync()
    w.row(what="eager add_ on 1 element, host loop (dispatch + launch)", ops=n,
          us_per_op=f"{(time.perf_counter() - t0) * 1e6 / n:.3f}")
    y = torch.zeros(1 << 20, device=DEV)
    t0 = time.perf_counter()
    for _ in range(n):
        y.mul_(1.0001)
    sync()
    w.row(what="eager mul_ on 2^20 fp32, host loop", ops=n,
          us_per_op=f"{(time.perf_counter() - t0) * 1e6 / n:.3f}")
    if DEV.type == "cuda":
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                x.add_(1)
            with torch.cuda.graph(g):
                for _ in range(1000):
                    x.add_(1)
        torch.cuda.current_stream().wait_stream(s)
        t = statistics.median(time_fn(g.replay, 2, 10))
        w.row(what="1000 add_ on 1 element replayed in a CUDA graph (GPU time per kernel)",
              ops=1000, us_per_op=f"{t * 1e3 / 1000:.3f}")
    log("launch done")


# --- what the model's structure rests on ---------------------------------------------------

def align_table():
    """cuBLAS picks its fast tensor-core kernels only when every operand's leading dimension is a
    multiple of 16 bytes; otherwise it falls back to narrower-access kernels (`..._align1`,
    `align2`). Row-major A[m,k] @ B[k,n] = C[m,n] has leading dimensions k (A) and n (B, C):
    each of m, n and k moved off a multiple of 8 in turn, and a linear layer's three GEMMs as
    autograd runs them (y = x W^T, dx = g W, dW = g^T x) at GPT-2's logits, vocabulary 50257
    against 50304."""
    w = Csv("align.csv", ["format", "case", "m", "n", "k", "ms", "tflops"])
    s = ARGS.smoke
    for fmt in ["amp-bf16", "fp32"] if s else ["amp-bf16", "amp-fp16", "tf32", "fp32"]:
        set_format(fmt)
        dt = half_of(fmt) or torch.float32
        for base in ([64] if s else [2048, 4096]):
            for which in "mnk":
                for d in [0, -1, 1, 2, 4, 8]:
                    if d == 0 and which != "m":
                        continue
                    dims = dict(m=base, n=base, k=base)
                    dims[which] += d
                    a = torch.randn(dims["m"], dims["k"], device=DEV, dtype=dt)
                    b = torch.randn(dims["k"], dims["n"], device=DEV, dtype=dt)
                    t = statistics.median(time_fn(lambda: a @ b, 2, 3 if s else 10, per_call=False))
                    w.row(format=fmt, case=f"mm {which}{d:+d}", **dims, ms=f"{t:.5f}",
                          tflops=f"{2.0 * dims['m'] * dims['n'] * dims['k'] / t / 1e9:.2f}")
                    del a, b
        for T, din, vocab in ([(64, 32, 100), (64, 32, 128)] if s else
                              [(8192, 768, 50257), (8192, 768, 50304), (8192, 1024, 50257),
                               (8192, 1024, 50304), (8192, 768, 50264)]):
            x = torch.randn(T, din, device=DEV, dtype=dt)
            W = torch.randn(vocab, din, device=DEV, dtype=dt)
            g = torch.randn(T, vocab, device=DEV, dtype=dt)
            for name, fn, (m, n, k) in [("linear forward", lambda: F.linear(x, W), (T, vocab, din)),
                                        ("linear dx", lambda: g.mm(W), (T, din, vocab)),
                                        ("linear dW", lambda: g.t().mm(x), (vocab, din, T))]:
                t = statistics.median(time_fn(fn, 2, 3 if s else 10, per_call=False))
                w.row(format=fmt, case=name, m=m, n=n, k=k, ms=f"{t:.5f}",
                      tflops=f"{2.0 * m * n * k / t / 1e9:.2f}")
            del x, W, g
        log(f"align {fmt} done")


class _CountOps:
    """Counts the aten operators a step dispatches (forward, the autograd engine's backward,
    the optimizer), with their input dtypes and shapes, through a TorchDispatchMode."""

    def __init__(self, detail):
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                outer.n += 1
                if detail:
                    ins = [a for a in args if isinstance(a, torch.Tensor)]
                    for a in args:
                        if isinstance(a, (list, tuple)):
                            ins += [t for t in a if isinstance(t, torch.Tensor)]
                    o = out[0] if isinstance(out, (list, tuple)) and out else out
                    key = (str(func.overloadpacket.__name__),
                           " ".join(str(t.dtype).replace("torch.", "") for t in ins[:3]),
                           " ".join("x".join(map(str, t.shape)) for t in ins[:3]),
                           str(o.dtype).replace("torch.", "") if isinstance(o, torch.Tensor) else "")
                    outer.ops[key] = outer.ops.get(key, 0) + 1
                return out

        self.mode, self.n, self.ops = Mode(), 0, {}




def host_table():
    """What eager PyTorch's host spends per training step where the GPU's work is negligible:
    tiny fc and GPT models (widths 16-64) over depths and optimizers, wall time per step, the
    GPU's span of a step, and the aten operators dispatched per step. The host's cost is the
    same at any width, so this is the host-dispatch floor of every model of that structure."""
    w = Csv("host.csv", ["model", "optimizer", "layers", "format", "foreach", "wall_ms",
                         "gpu_ms", "aten_ops", "wall_us_per_op"])
    s = ARGS.smoke
    opts = {"sgd": lambda ps: torch.optim.SGD(ps, lr=0.01),
            "momentum": lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9),
            "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-4, alpha=0.9, momentum=0.9, eps=1.0),
            "adam": lambda ps: torch.optim.Adam(ps, lr=1e-4),
            "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.01)}
    cases = []
    for fmt in ["tf32", "amp-bf16"]:
        for on in opts:
            for layers in [1, 2, 4, 8, 16]:
                cases.append(("fc", on, layers, fmt))
        for layers in [1, 2, 4, 8]:
            cases.append(("gpt", "adamw", layers, fmt))
    for kind, on, layers, fmt in cases:
        set_format(fmt)
        if kind == "fc":
            model = fc_model(layers, 16, 16, 16)
            x, y = torch.randn(16, 16), torch.randint(0, 16, (16,))
            loss_f = F.cross_entropy
        else:
            model = Gpt(layers, 64, 2, 16, 64, False)
            x, y = torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16))
            loss_f = lambda o, t: F.cross_entropy(o.reshape(-1, o.shape[-1]).float(), t.reshape(-1))
        model, x, y = model.to(DEV), x.to(DEV), y.to(DEV)
        opt = opts[on](model.parameters())
        step = _step_fn(model, opt, x, y, loss_f, fmt)
        gpu = statistics.median(time_fn(step, 10, 5 if s else 30))
        sync()
        walls = []
        for _ in range(3):
            w0 = time.perf_counter()
            for _ in range(10 if s else 50):
                step()
            sync()
            walls.append((time.perf_counter() - w0) * 1e3 / (10 if s else 50))
        c = _CountOps(False)
        with c.mode:
            step()
        sync()
        wall = statistics.median(walls)
        w.row(model=kind, optimizer=on, layers=layers, format=fmt,
              foreach=str(opt.defaults.get("foreach")), wall_ms=f"{wall:.4f}",
              gpu_ms=f"{gpu:.4f}", aten_ops=c.n, wall_us_per_op=f"{wall * 1e3 / c.n:.3f}")
        del model, opt, x, y
    log("host done")


def shapes_table():
    """Every aten operator of one training step of a 2-layer GPT-2-small-width decoder (the
    measured rows' layer, fewer of them) and of the small fc, with input dtypes and shapes and
    output dtype (dispatch counts), then the same step's GPU time by operator and input shapes
    (profiler): what autocast casts, which passes run in fp32, and what they cost."""
    from torch.profiler import ProfilerActivity, profile as prof

    w = Csv("shapes.csv", ["run", "source", "op", "dtypes", "shapes", "out_dtype", "count", "ms"])
    s = ARGS.smoke
    g = dict(layers=2, d_model=64 if s else 768, heads=4 if s else 12, seq=32 if s else 1024,
             vocab=512 if s else 50257, batch=2 if s else 8)
    f = dict(layers=4, nodes=32 if s else 1024, input=2000, output=200, batch=16 if s else 512)
    for kind, p, fmt in [("gpt", g, "amp-bf16"), ("gpt", g, "tf32"), ("fc", f, "tf32"),
                         ("fc", f, "amp-bf16")]:
        set_format(fmt)
        model, opt_f, (x, y), loss_f, _ = build(kind, p)
        model, x, y = model.to(DEV), x.to(DEV), y.to(DEV)
        opt = opt_f(model.parameters())
        step = _step_fn(model, opt, x, y, loss_f, fmt)
        for _ in range(3):
            step()
        sync()
        run = f"{kind}:" + ",".join(f"{k}={v}" for k, v in p.items()) + f" {fmt}"
        c = _CountOps(True)
        with c.mode:
            step()
        sync()
        for (op, dts, shp, od), n in sorted(c.ops.items(), key=lambda kv: -kv[1]):
            w.row(run=run, source="dispatch", op=op, dtypes=dts, shapes=shp, out_dtype=od,
                  count=n, ms="")
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV.type == "cuda" else [])
        with prof(activities=acts, record_shapes=True) as pr:
            for _ in range(2):
                step()
            sync()
        for e in pr.key_averages(group_by_input_shape=True):
            dev = getattr(e, "self_device_time_total", None)
            if dev is None:
                dev = getattr(e, "self_cuda_time_total", 0)
            if DEV.type != "cuda":
                dev = e.self_cpu_time_total
            if not e.key.startswith("aten::") or dev <= 0:
                continue
            w.row(run=run, source="profile", op=e.key, dtypes="",
                  shapes=" ".join("x".join(map(str, sh)) for sh in (e.input_shapes or [])[:3]),
                  out_dtype="", count=e.count // 2, ms=f"{dev / 1e3 / 2:.4f}")
        del model, opt, x, y
        if DEV.type == "cuda":
            torch.cuda.empty_cache()
    log("shapes done")


def facts():
    with open(os.path.join(ARGS.outdir, "facts.txt"), "w") as f:
        f.write(f"date {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
        f.write(f"python {platform.python_version()} torch {torch.__version__}\n")
        if DEV.type == "cuda":
            p = torch.cuda.get_device_properties(0)
            f.write(f"device {p.name} sms {p.multi_processor_count} "
                    f"memory_gib {p.total_memory / 2**30:.1f} "
                    f"l2_mb {getattr(p, 'L2_cache_size', 0) / 2**20:.0f}\n")
            f.write(f"cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}\n")
            try:
                f.write(subprocess.run(["nvidia-smi", "-q", "-d", "CLOCK,POWER,PERFORMANCE"],
                                       capture_output=True, text=True, timeout=30).stdout)
            except Exception as e:  # facts are best effort; the measurements follow anyway
                f.write(f"nvidia-smi: {e}\n")
        else:
            f.write(f"cpu {platform.processor()} threads {torch.get_num_threads()}\n")


def main():
    global ARGS, DEV
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--h200-batches", action="store_true")
    ap.add_argument("--sections", default="facts,e2e,conv,norm,launch,stream,gemm")
    ap.add_argument("--e2e-set", choices=["first", "extra"], default="first",
                    help="first: the configs of the first tables; extra: configs added later")
    ap.add_argument("--fp8-cast", choices=["compiled", "eager"], default="eager",
                    help="fp8 section's casts: eager aten kernels (default), or torch.compile's "
                         "(2026-11-30, dynamic shapes: its amax reduction took 0.5-1.8 ms a call)")
    ap.add_argument("--fp8-no-gemm", action="store_true", help="fp8 section: no GEMM table")
    ARGS = ap.parse_args()
    os.makedirs(ARGS.outdir, exist_ok=True)
    DEV = torch.device("cpu" if ARGS.smoke or not torch.cuda.is_available() else "cuda")
    if DEV.type == "cpu" and not ARGS.smoke:
        sys.exit("measure_gpu.py: no CUDA device (use --smoke to check the code on a CPU)")
    torch.backends.cudnn.benchmark = True  # as DeepLearningExamples trains
    torch.manual_seed(0)
    for sec in ARGS.sections.split(","):
        t0 = time.time()
        try:
            {"facts": facts, "e2e": e2e, "conv": conv_table, "gemm": gemm_table,
             "stream": stream_table, "launch": launch_table, "norm": norm_table,
             "align": align_table, "host": host_table, "shapes": shapes_table,
             "fp8": fp8_table}[sec]()
        except Exception:  # the other sections still run
            import traceback

            traceback.print_exc()
        log(f"section {sec}: {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
