"""A small seeded decoder-only transformer: the built-in extractor's model.

Seeded initialisation makes its hidden states reproducible across processes, so tests
can compare a killed-and-resumed run with an uninterrupted one tensor by tensor. It is
causal, so right padding never changes a real token's states.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bot.extract.spec import BuiltinModel


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn_mult: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, ffn_mult * hidden)
        self.down = nn.Linear(ffn_mult * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (z.view(b, t, self.heads, h // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, h))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TinyTransformer(nn.Module):
    """Returns every layer's output, embeddings first (Hugging Face's order)."""

    def __init__(self, cfg: BuiltinModel) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.pos = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.blocks = nn.ModuleList(
            Block(cfg.hidden, cfg.heads, cfg.ffn_mult) for _ in range(cfg.layers)
        )

    def forward(self, input_ids: torch.Tensor) -> list[torch.Tensor]:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.embed(input_ids) + self.pos(positions)
        states = [x]
        for block in self.blocks:
            x = block(x)
            states.append(x)
        return states


def build_model(cfg: BuiltinModel, device: torch.device, dtype: torch.dtype) -> TinyTransformer:
    """Same seed, same weights: initialised on CPU with a private generator, then moved."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = TinyTransformer(cfg)
    return model.to(device=device, dtype=dtype).eval()


def byte_tokens(text: str, vocab: int) -> tuple[int, ...]:
    """BOS then UTF-8 bytes shifted past the 4 special ids: no tokenizer files needed."""
    return (1, *((b + 4) % vocab for b in text.encode("utf-8")))
