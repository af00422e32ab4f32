# The gpt family written independently in PyTorch (Debian's python3-torch), for
# tests/gpt_test.cc: the same parameter names and shapes as src/model/gpt.cc, so the test can
# load these weights into trainbench's module and compare the loss and every gradient.
#
#   gpt_twin.py step  '{"layers": 2, "d": 32, ...}'   one step's weights, tokens, loss, gradients
#   gpt_twin.py count '{"layers": 22, ...}'           the parameter count, built on the meta device
#
# Prints one JSON object.
import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, device):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d, device=device))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.weight


class Norm(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        if c["rmsnorm"]:
            self.rms = RMSNorm(c["d"], device)
        else:
            self.ln = nn.LayerNorm(c["d"], device=device)

    def forward(self, x):
        return self.rms(x) if hasattr(self, "rms") else self.ln(x)


class Mlp(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        d, ff, b = c["d"], c["ff"], c["bias"]
        self.swiglu = c["swiglu"]
        if self.swiglu:
            self.gate = nn.Linear(d, ff, bias=b, device=device)
            self.up = nn.Linear(d, ff, bias=b, device=device)
            self.down = nn.Linear(ff, d, bias=b, device=device)
        else:
            self.fc1 = nn.Linear(d, ff, bias=b, device=device)
            self.fc2 = nn.Linear(ff, d, bias=b, device=device)

    def forward(self, x):
        if self.swiglu:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Moe(nn.Module):
    """Top-k routing with a capacity per expert, written per token and per expert (loops, not
    the index arithmetic trainbench uses), so the two agree only if both are right."""

    def __init__(self, c, device):
        super().__init__()
        self.c = c
        self.router = nn.Linear(c["d"], c["experts"], bias=False, device=device)
        self.experts = nn.ModuleList([Mlp(c, device) for _ in range(c["experts"])])

    def forward(self, h):
        c = self.c
        B, s, d = h.shape
        T, E, k = B * s, c["experts"], c["top_k"]
        cap = max(1, min(T, math.ceil(c["capacity"] * T * k / E)))
        x = h.reshape(T, d)
        probs = torch.softmax(self.router(x).float(), -1)
        top_p, top_e = probs.topk(k, -1)
        gates = top_p / top_p.sum(-1, keepdim=True) if k > 1 else top_p
        rows = [[] for _ in range(E)]  # (token, gate) per expert, in priority order
        counts = [0] * E
        for j in range(k):
            for t in range(T):
                e = int(top_e[t, j])
                counts[e] += 1
                if len(rows[e]) < cap:
                    rows[e].append((t, gates[t, j]))
        y = torch.zeros(T, d, dtype=x.dtype)
        for e in range(E):
            if not rows[e]:
                continue
            idx = torch.tensor([t for t, _ in rows[e]])
            out = self.experts[e](x[idx])
            for n, (t, g) in enumerate(rows[e]):
                y = y.index_add(0, torch.tensor([t]), (out[n] * g.to(x.dtype)).unsqueeze(0))
        share = torch.tensor(counts, dtype=torch.float32) / (k * T)
        aux = E * (share * probs.mean(0)).sum()
        return y.view(B, s, d), aux


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


class Block(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        self.c = c
        d, kvw = c["d"], c["kv_heads"] * c["d"] // c["heads"]
        self.norm1 = Norm(c, device)
        self.qkv = nn.Linear(d, d + 2 * kvw, bias=c["bias"], device=device)
        self.out = nn.Linear(d, d, bias=c["bias"], device=device)
        self.norm2 = Norm(c, device)
        if c["experts"] > 1:
            self.moe = Moe(c, device)
        else:
            self.mlp = Mlp(c, device)

    def forward(self, x, cos, sin):
        c = self.c
        B, s, d = x.shape
        H, KV = c["heads"], c["kv_heads"]
        hd = d // H
        q, k, v = self.qkv(self.norm1(x)).split([d, KV * hd, KV * hd], -1)
        q = q.view(B, s, H, hd).transpose(1, 2)
        k = k.view(B, s, KV, hd).transpose(1, 2)
        v = v.view(B, s, KV, hd).transpose(1, 2)
        if cos is not None:
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, 1)
        v = v.repeat_interleave(H // KV, 1)
        causal = torch.full((s, s), float("-inf")).triu(1)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(hd) + causal, -1)
        x = x + self.out((w @ v).transpose(1, 2).reshape(B, s, d))
        if hasattr(self, "moe"):
            y, aux = self.moe(self.norm2(x))
            return x + y, aux
        return x + self.mlp(self.norm2(x)), None


class Gpt(nn.Module):
    def __init__(self, c, device=None):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c["vocab"], c["d"], device=device)
        if not c["rope"]:
            self.pos_embed = nn.Embedding(c["positions"], c["d"], device=device)
        self.layers = nn.ModuleList([Block(c, device) for _ in range(c["layers"])])
        self.final_norm = Norm(c, device)
        if not c["tied"]:
            self.lm_head = nn.Linear(c["d"], c["vocab"], bias=False, device=device)

    def forward(self, tokens, targets):
        c = self.c
        s = tokens.shape[1]
        x = self.embed(tokens)
        cos = sin = None
        if c["rope"]:
            hd = c["d"] // c["heads"]
            inv = 10000.0 ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
            ang = torch.outer(torch.arange(s, dtype=torch.float64), inv)
            both = torch.cat([ang, ang], -1)
            cos, sin = both.cos().float(), both.sin().float()
        else:
            x = x + self.pos_embed(torch.arange(s))
        aux = None
        for layer in self.layers:
            x, a = layer(x, cos, sin)
            if a is not None:
                aux = a if aux is None else aux + a
        h = self.final_norm(x)
        logits = h @ self.embed.weight.t() if c["tied"] else self.lm_head(h)
        loss = F.cross_entropy(logits.reshape(-1, c["vocab"]).float(), targets.reshape(-1))
        if aux is not None and c["aux_loss"] > 0:
            loss = loss + c["aux_loss"] * aux
        return loss


def main():
    mode, c = sys.argv[1], json.loads(sys.argv[2])
    if mode == "count":
        m = Gpt(c, device="meta")
        print(json.dumps({"params": sum(p.numel() for p in m.parameters())}))
        return
    torch.manual_seed(7)
    m = Gpt(c)
    with torch.no_grad():  # away from the default inits, so a transposed weight shows
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if p.dim() == 1 else 0.0))
    tokens = torch.randint(0, c["vocab"], (c["batch"], c["seq"] + 1))
    loss = m(tokens[:, :-1], tokens[:, 1:])
    loss.backward()
    print(json.dumps({
        "tokens": tokens.tolist(),
        "loss": loss.item(),
        "params": {n: {"shape": list(p.shape), "value": p.detach().reshape(-1).tolist(),
                       # an expert no token reached has no gradient here, zeros in trainbench
                       "grad": (p.grad if p.grad is not None else torch.zeros_like(p))
                       .reshape(-1).tolist()}
                   for n, p in m.named_parameters()},
    }))


if __name__ == "__main__":
    main()
