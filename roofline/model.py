"""A transformer's shape, read from a Hugging Face ``config.json`` (chapter 1).

The configs of the book's models ship inside the package (``roofline/data/models``), so nothing is
downloaded; a reader's own ``config.json`` works the same way. From the shape come the exact
parameter count, the matmuls of one layer, and the KV-cache bytes per token.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from ._check import unknown_name
from .units import dtype_bytes

__all__ = ["Linear", "Model", "load_model", "model_names", "model_from_config"]

# Architectures whose HF config this loader reads as a dense decoder-only transformer with
# RMSNorm, rotary positions, grouped-query attention and a gated (SwiGLU) MLP.
_DENSE_FAMILIES = {"llama", "mistral", "qwen2"}


@dataclass(frozen=True)
class Linear:
    """One weight matrix applied to every token: ``in_features -> out_features``."""

    name: str
    in_features: int
    out_features: int
    bias: bool = False

    @property
    def params(self) -> int:
        return self.in_features * self.out_features + (self.out_features if self.bias else 0)


@dataclass(frozen=True)
class Model:
    """The shape of a dense decoder-only transformer (Llama family)."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    max_position_embeddings: int | None = None  # the context length the model was trained for

    @property
    def title(self) -> str:
        """A display name: 'llama-3.1-405b' -> 'Llama 3.1 405B'."""
        words = self.name.replace("_", "-").split("-")
        return " ".join(w.upper() if re.fullmatch(r"\d+(\.\d+)?[bmk]", w) else w.capitalize() for w in words)

    # --- the pieces -----------------------------------------------------------------------
    def layer_linears(self) -> tuple[Linear, ...]:
        """The seven matmuls of one decoder layer, in the order a token meets them."""
        h, q, kv, i = self.hidden_size, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim, self.intermediate_size
        ab, mb = self.attention_bias, self.mlp_bias
        return (
            Linear("q_proj", h, q, ab),
            Linear("k_proj", h, kv, ab),
            Linear("v_proj", h, kv, ab),
            Linear("o_proj", q, h, ab),
            Linear("gate_proj", h, i, mb),
            Linear("up_proj", h, i, mb),
            Linear("down_proj", i, h, mb),
        )

    @property
    def lm_head(self) -> Linear:
        """The output projection to vocabulary logits (shared with the embedding if tied)."""
        return Linear("lm_head", self.hidden_size, self.vocab_size)

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Parameters of the output projection that are not also the embedding (0 when tied)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def layer_matmul_params(self) -> int:
        """Weights (and biases) of one layer's seven matmuls."""
        return sum(lin.params for lin in self.layer_linears())

    @property
    def norm_params(self) -> int:
        """RMSNorm scales: two per layer and one final."""
        return (2 * self.num_layers + 1) * self.hidden_size

    @property
    def params(self) -> int:
        """Total parameters, exactly as the checkpoint stores them (Llama 3 8B: 8,030,261,248)."""
        return self.num_layers * self.layer_matmul_params + self.embedding_params + self.lm_head_params + self.norm_params

    @property
    def attention_width(self) -> int:
        """Query heads times head size (the width attention's score and value products run over)."""
        return self.num_heads * self.head_dim

    def kv_bytes_per_token(self, dtype: str = "bf16") -> float:
        """KV-cache bytes one token adds: K and V, every layer, every KV head (Llama 3 8B: 131,072)."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes(dtype)

    @property
    def gqa_group(self) -> int:
        """Query heads sharing one KV head (1 = multi-head, num_heads = multi-query)."""
        return self.num_heads // self.num_kv_heads


def _int_field(config: dict, key: str, where: str, default=None) -> int:
    if key not in config:
        if default is not None:
            return default
        raise ValueError(f"{where}: config is missing '{key}'")
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{where}: '{key}' must be a positive integer, got {value!r}")
    return value


def model_from_config(config: dict, name: str = "model") -> Model:
    """Build a :class:`Model` from the dict of a Hugging Face ``config.json``."""
    if not isinstance(config, dict):
        raise TypeError(f"config must be the dict of a config.json, got {type(config).__name__}")
    where = f"model config {name!r}"
    family = config.get("model_type")
    if family not in _DENSE_FAMILIES:
        raise ValueError(f"{where}: model_type {family!r} is not supported yet; supported: {', '.join(sorted(_DENSE_FAMILIES))}")
    if any(k in config for k in ("num_local_experts", "n_routed_experts", "kv_lora_rank")):
        raise ValueError(f"{where}: mixture-of-experts and latent-attention configs are not supported yet")
    hidden = _int_field(config, "hidden_size", where)
    heads = _int_field(config, "num_attention_heads", where)
    kv_heads = _int_field(config, "num_key_value_heads", where, default=heads)
    head_dim = config.get("head_dim")
    if head_dim is None:
        if hidden % heads:
            raise ValueError(f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}; give head_dim")
        head_dim = hidden // heads
    head_dim = _int_field({"head_dim": head_dim}, "head_dim", where)
    if heads % kv_heads:
        raise ValueError(f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    return Model(
        name=name,
        hidden_size=hidden,
        intermediate_size=_int_field(config, "intermediate_size", where),
        num_layers=_int_field(config, "num_hidden_layers", where),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=_int_field(config, "vocab_size", where),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        attention_bias=bool(config.get("attention_bias", False)),
        mlp_bias=bool(config.get("mlp_bias", False)),
        max_position_embeddings=config.get("max_position_embeddings"),
    )


def _shipped() -> dict[str, str]:
    folder = resources.files("roofline").joinpath("data/models")
    return {p.name.removesuffix(".json"): p.name for p in folder.iterdir() if p.name.endswith(".json")}


def model_names() -> list[str]:
    """Names of the shipped model configs, e.g. ['llama-3-8b', ...]."""
    return sorted(_shipped())


@cache
def _load_shipped(name: str) -> Model:
    text = resources.files("roofline").joinpath(f"data/models/{name}.json").read_text(encoding="utf-8")
    return model_from_config(json.loads(text), name)


def load_model(name_or_path: str | Path | Model) -> Model:
    """A shipped model by name ('llama-3-8b') or any ``config.json`` by path."""
    if isinstance(name_or_path, Model):
        return name_or_path
    if not isinstance(name_or_path, (str, Path)):
        raise TypeError(f"model must be a name such as 'llama-3-8b', a path to a config.json, or a Model; got {name_or_path!r}")
    key = str(name_or_path).strip().lower()
    if key in _shipped():
        return _load_shipped(key)
    path = Path(name_or_path)
    if path.is_file():
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"model config {str(path)!r} is not valid JSON: {exc}") from None
        return model_from_config(config, path.parent.name if path.name == "config.json" else path.stem)
    raise unknown_name("model", str(name_or_path), _shipped())
