"""Model shapes from Hugging Face config.json files."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import roofline as rl
from roofline.core.model import model_from_config
import roofline.core.model


def test_llama_3_8b_counts_exactly(llama):
    assert llama.params == 8_030_261_248
    # without the RMSNorm scales, as the measured H200 file states it
    assert llama.params - llama.norm_params == 8_029_995_008
    assert llama.kv_bytes_per_token("bf16") == 131_072
    assert llama.gqa_group == 4 and llama.head_dim == 128
    assert llama.title == "Llama 3 8B"


def test_llama_3_1_405b_counts_exactly():
    assert rl.load_model("llama-3.1-405b").params == 405_853_388_800


def test_layer_linears_are_the_seven_llama_matmuls(llama):
    names = [lin.name for lin in llama.layer_linears()]
    assert names == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert sum(l.params for l in llama.layer_linears()) == llama.layer_matmul_params == 218_103_808


def _config(**changes):
    base = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def test_tied_embeddings_are_counted_once():
    untied = model_from_config(_config())
    tied = model_from_config(_config(tie_word_embeddings=True))
    assert untied.params - tied.params == 1000 * 64


def test_biases_and_head_dim_given_apart():
    plain = model_from_config(_config())
    biased = model_from_config(_config(attention_bias=True))
    # q, k, v and o biases in each of the two layers: 4*16 + 2*16 + 2*16 + 64
    assert biased.params - plain.params == 2 * (64 + 32 + 32 + 64)
    wide = model_from_config(_config(head_dim=32))
    assert wide.attention_width == 128 and wide.kv_bytes_per_token() == 2 * 2 * 2 * 32 * 2


def test_mqa_defaults_and_kv_heads():
    mha = model_from_config(_config(num_key_value_heads=None))
    assert mha.num_kv_heads == 4 and mha.gqa_group == 1
    mqa = model_from_config(_config(num_key_value_heads=1))
    assert mqa.kv_bytes_per_token() == mha.kv_bytes_per_token() / 4


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hidden_size": None}, "missing 'hidden_size'"),
        ({"hidden_size": -64}, "'hidden_size' must be a positive integer"),
        ({"num_hidden_layers": 2.5}, "'num_hidden_layers' must be a positive integer"),
        ({"vocab_size": True}, "'vocab_size' must be a positive integer"),
        ({"num_key_value_heads": 3}, "not a multiple of num_key_value_heads"),
        ({"model_type": "bert"}, "model_type 'bert' is not supported"),
        ({"num_local_experts": 8}, "mixture-of-experts"),
    ],
)
def test_bad_configs_get_clear_errors(change, message):
    with pytest.raises(ValueError, match=message):
        model_from_config(_config(**change), "test")


def test_load_by_path_and_by_name(tmp_path):
    path = tmp_path / "my-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_config()))
    m = rl.load_model(path)
    assert m.name == "my-model" and m.params == model_from_config(_config()).params
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        rl.load_model(tmp_path / "broken.json")
    with pytest.raises(KeyError, match="did you mean .*'llama-3-8b'"):
        rl.load_model("llama-3-8")


@given(layers=st.integers(1, 200), hidden=st.sampled_from([64, 128, 4096]), vocab=st.integers(1, 200_000))
def test_parameters_grow_with_layers(layers, hidden, vocab):
    cfg = _config(num_hidden_layers=layers, hidden_size=hidden, vocab_size=vocab)
    one_more = _config(num_hidden_layers=layers + 1, hidden_size=hidden, vocab_size=vocab)
    a, b = model_from_config(cfg), model_from_config(one_more)
    assert b.params - a.params == a.layer_matmul_params + 2 * hidden


def _fields(**changes):
    base = dict(name="tiny", hidden_size=64, intermediate_size=160, num_layers=2, num_heads=4, num_kv_heads=2,
                head_dim=16, vocab_size=1000)
    return {**base, **changes}


@pytest.mark.parametrize("changes, error, message", [
    (dict(hidden_size=64.5), TypeError, "Model.hidden_size must be a whole number"),
    (dict(hidden_size=0), ValueError, "Model.hidden_size must be a positive integer"),
    (dict(num_kv_heads=0), ValueError, "Model.num_kv_heads must be a positive integer"),
    (dict(num_kv_heads=3), ValueError, r"num_heads \(4\) must be a multiple of num_kv_heads \(3\)"),
    (dict(vocab_size=True), TypeError, "Model.vocab_size must be a whole number"),
    (dict(num_layers=2**60), ValueError, "no larger than 2\\*\\*53"),
    (dict(tie_word_embeddings="yes"), TypeError, "tie_word_embeddings must be True or False"),
    (dict(moe=rl.core.model.MoE(8, 2, 32, first_dense_layers=2)), ValueError, "no layer of the 2 has experts"),
    (dict(name=""), TypeError, "Model.name"),
])
def test_a_model_built_directly_is_validated(changes, error, message):
    with pytest.raises(error, match=message):
        rl.Model(**_fields(**changes))


def test_a_valid_model_built_directly_counts_like_its_config():
    m = rl.Model(**_fields())
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1000}
    assert m.params == model_from_config(cfg).params
    with pytest.raises(ValueError, match=r"MoE.experts_per_token \(9\) exceeds num_experts \(8\)"):
        rl.core.model.MoE(8, 9, 32)


def test_path_like_model_names_say_what_is_wrong_with_the_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="is a directory with no config.json in it"):
        rl.load_model(".")
    with pytest.raises(ValueError, match="is a directory with no config.json in it"):
        rl.load_model(tmp_path)
    with pytest.raises(ValueError, match="not found: there is no such file in '.'"):
        rl.load_model("missing.json")
    with pytest.raises(ValueError, match="not found: its folder does not exist either"):
        rl.load_model("no/such/folder/config.json")
    # a folder holding a config.json is read through it
    (tmp_path / "tiny").mkdir()
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 1000}
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(cfg))
    assert rl.load_model("tiny").name == "tiny"
    # a plain word is still a shipped-model name, with close matches
    with pytest.raises(KeyError, match="did you mean 'llama-3-8b'"):
        rl.load_model("llama-3-8")


@pytest.mark.parametrize("content, message", [
    (b'{"model_type": "llama", "name": "caf\xe9"}', r"bad.json' is not UTF-8 text \(byte 36"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"num_hidden_layers": 1' + b"0" * 5000 + b"}", "is not valid JSON"),
    (b"[1, 2]", "must hold a JSON object"),
])
def test_unreadable_config_files_are_named(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        rl.load_model(path)


def test_sliding_layers_are_distinct_layers_with_a_window():
    with pytest.raises(ValueError, match="tuple of distinct layer numbers from 0 to 1"):
        rl.Model(**_fields(sliding_window=8, sliding_layers=(0, 0)))
    with pytest.raises(ValueError, match="tuple of distinct layer numbers"):
        rl.Model(**_fields(sliding_window=8, sliding_layers=(2,)))
    with pytest.raises(ValueError, match="needs a sliding_window"):
        rl.Model(**_fields(sliding_layers=(0,)))
    m = rl.Model(**_fields(sliding_window=8, sliding_layers=(0,)))
    assert m.kv_cache_bytes(100) == (100 + 8) * 2 * 2 * 16 * 2  # one full layer, one windowed
# --- formulas a reader can check by hand, in Llama 3 8B's config numbers (the `shape` fixture) ----


def test_the_shape_fixture_is_the_shipped_config(llama, shape):
    assert (llama.hidden_size, llama.num_layers, llama.num_heads, llama.num_kv_heads, llama.head_dim,
            llama.intermediate_size, llama.vocab_size) == (shape.hidden, shape.layers, shape.heads, shape.kv_heads,
                                                           shape.head_dim, shape.intermediate, shape.vocab)


def test_parameter_count_is_layers_of_seven_matmuls_plus_embedding_head_and_norms(llama, shape):
    h, i, v, n = shape.hidden, shape.intermediate, shape.vocab, shape.layers
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim  # 4096 and 1024 wide
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * i  # q, k, v, o; gate, up, down
    assert llama.layer_matmul_params == per_layer == 218_103_808
    assert llama.embedding_params == llama.lm_head_params == v * h  # untied: two tables
    assert llama.norm_params == (2 * n + 1) * h  # two RMSNorms per layer and a final one
    assert llama.params == n * per_layer + 2 * v * h + (2 * n + 1) * h == 8_030_261_248
    assert llama.active_params == llama.params  # dense: every token meets every weight
    assert llama.attention_width == q


def test_kv_bytes_per_token_are_k_and_v_for_every_layer_and_kv_head(llama, shape):
    kv_elements = 2 * shape.layers * shape.kv_heads * shape.head_dim  # 65,536 numbers per token
    for dtype, size in [("bf16", 2), ("fp8", 1), ("fp32", 4), ("int4", 0.5)]:
        assert llama.kv_bytes_per_token(dtype) == kv_elements * size
    assert llama.kv_bytes_per_token() == 131_072  # bf16 by default


def test_model_config_is_a_fresh_copy_of_the_shipped_json():
    from roofline.core.model import model_config, model_from_config

    c = model_config("llama-3-8b")
    assert c["num_key_value_heads"] == 8 and c["num_attention_heads"] == 32
    c["num_key_value_heads"] = 1
    assert model_config("llama-3-8b")["num_key_value_heads"] == 8  # the edit did not leak
    assert model_from_config(model_config("llama-3-8b"), "x").params == rl.load_model("llama-3-8b").params
    with pytest.raises(KeyError, match="unknown model"):
        model_config("llama-3-9b")
    with pytest.raises(TypeError, match="name must be a shipped model"):
        model_config(8)
def test_kv_bytes_per_layer_is_the_one_width_the_cache_counts(llama, shape):
    """One token's cache in one layer: a key and a value of head_dim for each KV head, two bytes each in
    bf16; DeepSeek-V3 keeps its 512-wide latent and 64-wide rotary key instead. The per-token and
    per-sequence counts are that width times the layers (a sliding window aside)."""
    assert llama.kv_bytes_per_layer() == 2 * shape.kv_heads * shape.head_dim * 2 == 4096
    assert llama.kv_bytes_per_token("fp8") == shape.layers * llama.kv_bytes_per_layer("fp8")
    v3 = rl.load_model("deepseek-v3")
    assert v3.kv_bytes_per_layer() == (512 + 64) * 2
    gemma = rl.load_model("gemma-2-9b")  # every other layer keeps only its last 4,096 tokens
    windowed = len(gemma.sliding_layers)
    assert gemma.kv_cache_bytes(10_000) == gemma.kv_bytes_per_layer() * (
        (gemma.num_layers - windowed) * 10_000 + windowed * 4096)


# --- shapes bounded where they enter (issue 33): a width a model can mean, a total a float counts exactly -------

@pytest.mark.parametrize("change, message", [
    ({"hidden_size": 2**40}, r"'hidden_size' must be a positive integer \(at most 1,048,576\), got 1099511627776"),
    ({"intermediate_size": 2**21}, r"'intermediate_size' must be a positive integer \(at most 1,048,576\)"),
    ({"num_attention_heads": 2**17}, r"'num_attention_heads' must be a positive integer \(at most 65,536\)"),
    ({"num_key_value_heads": 2**17}, r"'num_key_value_heads' must be a positive integer \(at most 65,536\)"),
    ({"vocab_size": 2**25}, r"'vocab_size' must be a positive integer \(at most 16,777,216\)"),
    ({"head_dim": 2**21}, r"'head_dim' must be a positive integer \(at most 1,048,576\)"),
    ({"max_position_embeddings": 2**31}, r"'max_position_embeddings' must be a positive integer \(at most 1,073,741,824\)"),
    ({"hidden_size": 2**20, "intermediate_size": 2**20, "num_hidden_layers": 100_000, "head_dim": 128},
     r"would have 3.3e\+17 parameters, more than the 9.01e\+15 \(2\*\*53\)"),
])
def test_shapes_past_any_model_are_refused_naming_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        model_from_config(_config(**change), "test")


def test_the_bounds_hold_for_a_model_built_directly_and_leave_every_shipped_model_in():
    from roofline.core.model import MAX_HEADS, MAX_PARAMS, MAX_VOCAB, MAX_WIDTH
    for change, message in ((dict(hidden_size=MAX_WIDTH + 1), "Model.hidden_size must be a positive integer no "
                                                              "larger than 1,048,576"),
                            (dict(num_heads=2 * MAX_HEADS, num_kv_heads=2), "Model.num_heads .* no larger than 65,536"),
                            (dict(vocab_size=MAX_VOCAB + 1), "Model.vocab_size .* no larger than 16,777,216")):
        with pytest.raises(ValueError, match=message):
            rl.Model(**_fields(**change))
    assert rl.Model(**_fields(hidden_size=MAX_WIDTH, head_dim=16)).hidden_size == MAX_WIDTH  # the bound itself is in
    biggest = max(rl.load_model(n).params for n in rl.model_names())
    assert biggest == rl.load_model("deepseek-v3").params < MAX_PARAMS / 1000


def test_layer_components_by_hand_for_llama_3_8b():
    from roofline.core.model import layer_components
    from roofline.core.ops import attention_flops

    parts = {c.name: c for c in layer_components("llama-3-8b", 8192)}
    assert parts["q_proj"].params == 4096 * 4096 and parts["k_proj"].params == 4096 * 1024  # 8 KV heads of 128
    assert parts["down_proj"].params == 14336 * 4096 and parts["down_proj"].flops == 2 * 14336 * 4096
    assert parts["norms"].params == 2 * 4096
    # causal: half of the S^2 pairs, 2 d FLOPs a pair for each of QK^T and PV, spread over S tokens
    assert parts["attention scores (QK^T)"].flops == 8192 * 4096 == parts["attention values (PV)"].flops
    full = {c.name: c for c in layer_components("llama-3-8b", 8192, causal=False)}
    assert full["attention values (PV)"].flops == 2 * parts["attention values (PV)"].flops
    scores_and_values = sum(c.flops for c in parts.values() if not c.params)
    assert scores_and_values * 8192 == attention_flops(8192, 8192, 4096, 1, causal=True)


def test_layer_components_refuses_experts_and_bad_input():
    from roofline.core.model import NotModelledError, layer_components

    with pytest.raises(NotModelledError, match="experts"):
        layer_components("mixtral-8x7b", 4096)
    with pytest.raises(TypeError, match="causal"):
        layer_components("llama-3-8b", 4096, causal="half")
    with pytest.raises(ValueError, match="context"):
        layer_components("llama-3-8b", 0)


def test_mlp_matmul_params_is_the_three_matrices_of_a_gated_mlp():
    m = rl.load_model("llama-3-8b")
    assert m.mlp_matmul_params == 3 * 4096 * 14336 == 176_160_768
    assert rl.load_model("gpt2").mlp_matmul_params == sum(lin.params for lin in rl.load_model("gpt2").dense_mlp_linears())
