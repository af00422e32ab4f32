#!/usr/bin/python3
"""PyTorch-eager twins of trainbench's reference models, for bench/suite_vs_eager.sh.

measure mode (default): builds the model a trainbench config names, trains it on one
synthetic batch, drops a warm-up, times `--steps` steps and prints one JSON object with the
median step time and steps/s.

  /usr/bin/python3 bench/suite_vs_eager.py --config resnet50:batch=32 --steps 5

  resnet50     torchvision.models.resnet50(weights=None), 3x224x224 images, 1000 classes,
               cross-entropy, SGD momentum 0.9
  transformer  Transformer-base (d 512, 8 heads, 6+6 layers, ff 2048, dropout 0.1), vocab
               37000, one embedding shared by source, target and the tied output projection,
               sentences of 50 tokens, label-smoothed (0.1) cross-entropy, Adam
  fc           trainbench's fc family (layers, nodes, input, output; its optimizer), for
               checking this script's plumbing without the reference families

Only `batch` (and fc's own keys, `optimizer`, `threads`) of the config is read; other keys
take the reference model's published settings above.

summarize mode: reads the files suite_vs_eager.sh collected and prints the medians.

  /usr/bin/python3 bench/suite_vs_eager.py --summarize DIR --out results.json

Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision).
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys
import time


def parse_config(text):
    family, _, rest = text.partition(":")
    cfg = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        cfg[key] = value
    return family, cfg


def optimizer_for(name, params):
    import torch
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=1e-3, alpha=0.9, momentum=0.9, eps=1.0)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    if name == "momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    return torch.optim.SGD(params, lr=1e-3)


def build(family, cfg):
    """(model, inputs tuple, target, loss function, optimizer name) for one config."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    if family == "resnet50":
        import torchvision
        batch = int(cfg.get("batch", 32))
        model = torchvision.models.resnet50(weights=None)
        x = torch.randn(batch, 3, 224, 224)
        y = torch.randint(0, 1000, (batch,))
        return model, (x,), y, F.cross_entropy, cfg.get("optimizer", "momentum")

    if family == "transformer":
        batch, length, vocab, d = int(cfg.get("batch", 16)), 50, 37000, 512

        class TransformerBase(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(vocab, d)
                self.core = nn.Transformer(d_model=d, nhead=8, num_encoder_layers=6,
                                           num_decoder_layers=6, dim_feedforward=2048,
                                           dropout=0.1, batch_first=True)
                pos = torch.arange(length).unsqueeze(1)
                div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
                pe = torch.zeros(length, d)
                pe[:, 0::2] = torch.sin(pos * div)
                pe[:, 1::2] = torch.cos(pos * div)
                self.register_buffer("pe", pe)
                self.register_buffer("mask", self.core.generate_square_subsequent_mask(length))

            def forward(self, src, tgt):
                scale = math.sqrt(d)
                s = self.embed(src) * scale + self.pe
                t = self.embed(tgt) * scale + self.pe
                h = self.core(s, t, tgt_mask=self.mask)
                return h @ self.embed.weight.t()  # output projection tied to the embedding

        model = TransformerBase()
        src = torch.randint(0, vocab, (batch, length))
        tgt = torch.randint(0, vocab, (batch, length))
        gold = torch.randint(0, vocab, (batch, length))

        def loss(out, y):
            return F.cross_entropy(out.reshape(-1, vocab), y.reshape(-1), label_smoothing=0.1)

        return model, (src, tgt), gold, loss, cfg.get("optimizer", "adam")

    if family == "fc":
        get = lambda k, v: int(cfg.get(k, v))
        layers, nodes, inp, out, batch = (get("layers", 4), get("nodes", 1024),
                                          get("input", 2000), get("output", 200),
                                          get("batch", 512))
        mods, width = [], inp
        for _ in range(layers):
            mods += [nn.Linear(width, nodes), nn.ReLU()]
            width = nodes
        mods.append(nn.Linear(width, out))
        x = torch.rand(batch, inp) - 0.5
        y = torch.randint(0, out, (batch,))
        return nn.Sequential(*mods), (x,), y, F.cross_entropy, cfg.get("optimizer", "rmsprop")

    sys.exit(f"suite_vs_eager.py: no PyTorch twin of '{family}' (resnet50, transformer, fc)")


def measure(args):
    import torch

    family, cfg = parse_config(args.config)
    threads = int(cfg.get("threads", "0")) or os.cpu_count()
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)  # trainbench's prepare_runtime() does the same
    torch.manual_seed(args.seed)
    model, inputs, target, loss_fn, opt_name = build(family, cfg)
    model.train()
    opt = optimizer_for(opt_name, model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)  # trainbench releases gradients too
        loss = loss_fn(model(*inputs), target)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    print(json.dumps({"config": args.config, "side": "eager", "threads": threads,
                      "torch": torch.__version__, "step_times_s": times,
                      "median_step_s": median, "steps_per_s": 1.0 / median}))


def summarize(args):
    """Medians over the repetitions of each side's steps/s, and their ratio."""
    rows = {}
    for path in sorted(glob.glob(os.path.join(args.summarize, "*.json"))):
        name = os.path.basename(path)
        label, side, _rep, _ = name.split(".")
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        entry = rows.setdefault(label, {"trainbench": [], "eager": [], "config": None,
                                        "status": []})
        if side == "tb":
            result = doc["results"][0]
            entry["config"] = entry["config"] or result.get("config")
            entry["status"].append(result.get("status"))
            median = result.get("timing", {}).get("median_s")
            if result.get("status") == "ok" and median:
                entry["trainbench"].append(1.0 / median)
        else:
            entry["config"] = entry["config"] or doc.get("config")
            entry["eager"].append(doc["steps_per_s"])
    results = []
    for label, e in sorted(rows.items()):
        tb = statistics.median(e["trainbench"]) if e["trainbench"] else None
        py = statistics.median(e["eager"]) if e["eager"] else None
        results.append({"config": e["config"], "reps": max(len(e["trainbench"]), len(e["eager"])),
                        "trainbench_steps_per_s": tb, "eager_steps_per_s": py,
                        "trainbench_over_eager": tb / py if tb and py else None,
                        "trainbench_status": e["status"],
                        "trainbench_samples": e["trainbench"], "eager_samples": e["eager"]})
    doc = {"schema_version": 1, "kind": "trainbench.bench.suite_vs_eager",
           "benchmark": "suite_vs_eager", "results": results}
    text = json.dumps(doc, indent=2)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    for r in results:
        ratio = r["trainbench_over_eager"]
        print(f"{r['config']}: trainbench {r['trainbench_steps_per_s']} steps/s, eager "
              f"{r['eager_steps_per_s']} steps/s, ratio {ratio if ratio is None else round(ratio, 3)}",
              file=sys.stderr)
    return 0 if all(r["trainbench_over_eager"] for r in results) else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", help="a trainbench config: resnet50:batch=32, transformer:batch=16, fc:...")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--summarize", help="directory of collected results")
    p.add_argument("--out", help="with --summarize: also write the summary here")
    args = p.parse_args()
    if args.summarize:
        sys.exit(summarize(args))
    if not args.config:
        p.error("--config or --summarize is required")
    measure(args)


if __name__ == "__main__":
    main()
