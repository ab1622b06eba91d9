"""model.py: shapes for every preset, the zero-init flow head, RoPE only on the sequence."""

import pytest
import torch

import model as M
from flow import FlowConfig, elf_loss
from model import ELF, SIZES, ELFConfig, apply_rope, rope_table


@pytest.mark.parametrize("name", list(SIZES))
def test_every_preset_at_tiny_width(name):
    p = SIZES[name]
    # the preset's depth and head count, at 8 channels per head
    cfg = ELFConfig(
        latent_dim=12,
        vocab_size=30,
        hidden=8 * p["heads"],
        depth=p["depth"],
        heads=p["heads"],
        bottleneck=8,
        max_seq_len=32,
    )
    net = ELF(cfg)
    B, L = 3, 7
    z, x_sc = torch.randn(B, L, 12), torch.randn(B, L, 12)
    decode = torch.tensor([True, False, True])
    x_hat, logits = net(
        z, torch.rand(B), torch.rand(B) * 4, x_sc, decode, decode.nonzero().squeeze(1)
    )
    assert x_hat.shape == (B, L, 12)
    assert logits.shape == (2, L, 30)
    assert net(z, torch.rand(B), torch.rand(B))[1] is None  # no logits unless asked


def test_published_parameter_counts():
    """ELF-B/M/L with the T5-small encoder (D 512, V 32128): 105M / 342M / 652M [paper]."""
    want = {"ELF-B": 105e6, "ELF-M": 342e6, "ELF-L": 652e6}
    for name, n in want.items():
        with torch.device("meta"):
            net = ELF(ELFConfig(latent_dim=512, vocab_size=32128, **SIZES[name]))
        assert abs(net.num_params() - n) / n < 0.01, (name, net.num_params())


def test_bottleneck_zero_is_one_linear_that_trains():
    """bottleneck 0 (the ablation's "none" arm): the text projection is one Linear D -> H
    (D * H + H parameters in place of D * b + b * H + H), and it receives gradients."""
    kw = dict(latent_dim=10, vocab_size=17, hidden=32, depth=1, heads=4, max_seq_len=16)
    none, b8 = ELF(ELFConfig(bottleneck=0, **kw)), ELF(ELFConfig(bottleneck=8, **kw))
    assert [tuple(p.shape) for p in none.text_proj.parameters()] == [(32, 10), (32,)]
    assert none.num_params() - b8.num_params() == (10 * 32 + 32) - (10 * 8 + 8 * 32 + 32)
    torch.nn.init.normal_(none.final_layer.linear.weight)
    none(torch.randn(2, 5, 10), torch.rand(2), torch.rand(2))[0].square().sum().backward()
    assert none.text_proj.proj2.weight.grad.abs().sum() > 0


def test_zero_init_flow_head_predicts_zero():
    net = ELF(
        ELFConfig(
            latent_dim=10, vocab_size=17, hidden=32, depth=2, heads=4, bottleneck=8, max_seq_len=16
        )
    )
    x_hat, _ = net(torch.randn(2, 5, 10), torch.rand(2), torch.rand(2), torch.randn(2, 5, 10))
    assert torch.equal(x_hat, torch.zeros_like(x_hat))
    # the learned tokens start at N(0, 0.02), biases at zero
    assert 0.01 < net.t_emb_tokens.std().item() < 0.03
    assert torch.equal(net.blocks[0].attn.qkv.bias, torch.zeros_like(net.blocks[0].attn.qkv.bias))


def test_mode_tokens_gate_and_conditioning_change_output():
    net = ELF(
        ELFConfig(
            latent_dim=6, vocab_size=9, hidden=16, depth=1, heads=2, bottleneck=4, max_seq_len=8
        )
    )
    torch.nn.init.normal_(net.final_layer.linear.weight)  # break the zero init to see differences
    z, t, w = torch.randn(1, 4, 6), torch.rand(1), torch.rand(1)
    base = net(z, t, w)[0]
    assert not torch.allclose(base, net(z, t, w, decode=torch.tensor([True]))[0])
    assert not torch.allclose(base, net(z, t + 0.3, w)[0])
    assert not torch.allclose(base, net(z, t, w + 1.0)[0])
    assert not torch.allclose(base, net(z, t, w, x_sc=torch.randn(1, 4, 6))[0])
    assert torch.allclose(base, net(z, t, w, decode=torch.tensor([False]))[0])


def test_rope_is_a_relative_rotation():
    cos, sin = rope_table(16, 8, 10000.0, n_prefix=0)
    q, k = torch.randn(8), torch.randn(8)
    rot = lambda v, p: apply_rope(v.view(1, 1, 1, 8), cos[p : p + 1], sin[p : p + 1]).view(8)
    assert torch.allclose(rot(q, 0), q)  # position 0 is identity
    assert torch.allclose(rot(q, 5).norm(), q.norm())  # a rotation
    # only m - n matters
    assert torch.allclose(rot(q, 3) @ rot(k, 1), rot(q, 9) @ rot(k, 7), atol=1e-5)
    # interleaved pairs: (x0, x1) turn by angle p * theta^0 = p radians,
    # (x6, x7) by p * theta^(-6/8)
    e = torch.zeros(8)
    e[0] = 1
    assert torch.allclose(
        rot(e, 1)[:2], torch.tensor([torch.cos(torch.tensor(1.0)), torch.sin(torch.tensor(1.0))])
    )
    e = torch.zeros(8)
    e[7] = 1
    a = torch.tensor(2 * 10000.0 ** (-6 / 8))
    assert torch.allclose(rot(e, 2)[6:], torch.stack((-torch.sin(a), torch.cos(a))), atol=1e-6)


def test_the_12_prefix_positions_are_not_rotated(monkeypatch):
    """The table's 12 prefix rows are the identity: prefix q/k reach attention as normed, the
    sequence's are rotated from position 0 on."""
    net = ELF(
        ELFConfig(
            latent_dim=6, vocab_size=9, hidden=16, depth=1, heads=2, bottleneck=4, max_seq_len=8
        )
    )
    assert torch.equal(net.rope_cos[:12], torch.ones(12, 8)) and torch.equal(
        net.rope_sin[:12], torch.zeros(12, 8)
    )
    assert torch.equal(net.rope_cos[12], torch.ones(8)) and not torch.equal(
        net.rope_cos[13], torch.ones(8)
    )
    captured = {}
    real_sdpa = M.F.scaled_dot_product_attention
    monkeypatch.setattr(
        M.F,
        "scaled_dot_product_attention",
        lambda q, k, v: captured.update(q=q, k=k) or real_sdpa(q, k, v),
    )
    attn = net.blocks[0].attn
    h = torch.randn(2, 12 + 5, 16)
    attn(h, net.rope_cos[:17], net.rope_sin[:17])
    q, k, _ = attn.qkv(h).view(2, 17, 3, 2, 8).permute(2, 0, 3, 1, 4)
    # prefix and sequence position 0
    assert torch.equal(captured["q"][:, :, :13], attn.q_norm(q)[:, :, :13])
    assert torch.equal(captured["k"][:, :, :13], attn.k_norm(k)[:, :, :13])
    assert not torch.allclose(captured["q"][:, :, 13:], attn.q_norm(q)[:, :, 13:])


def test_too_long_sequence_is_refused():
    net = ELF(
        ELFConfig(
            latent_dim=6, vocab_size=9, hidden=16, depth=1, heads=2, bottleneck=4, max_seq_len=8
        )
    )
    with pytest.raises(ValueError, match="RoPE table"):
        net(torch.randn(1, 9, 6), torch.rand(1), torch.rand(1))


def test_a_cut_vocabulary_maps_ids_to_logit_rows_and_back():
    """cut_vocab: the head has V' outputs; vocab_index sends each kept id to its row and
    every other id to row 0 (the unknown token); token_ids undoes it for the kept ids."""
    cfg = ELFConfig(
        latent_dim=6,
        vocab_size=20,
        hidden=16,
        depth=1,
        heads=2,
        bottleneck=4,
        max_seq_len=8,
        cut_vocab=4,
    )
    net = ELF(cfg)
    net.vocab_ids.copy_(torch.tensor([1, 3, 7, 19]))  # [UNK] = 1 first, as train.py puts it
    assert net.decoder_head.unembed.weight.shape == (4, 6)
    kept = torch.tensor([[3, 7, 19, 1]])
    assert net.vocab_index(kept).tolist() == [[1, 2, 3, 0]]
    assert torch.equal(net.token_ids(net.vocab_index(kept)), kept)
    assert net.vocab_index(torch.tensor([0, 5, 18])).tolist() == [0, 0, 0]  # outside: [UNK]'s row
    z = torch.randn(2, 5, 6)
    _, logits = net(
        z,
        torch.ones(2),
        torch.ones(2),
        decode=torch.ones(2, dtype=torch.bool),
        decode_idx=torch.arange(2),
    )
    assert logits.shape == (2, 5, 4)
    assert set(net.token_ids(logits.argmax(-1)).flatten().tolist()) <= {1, 3, 7, 19}
    again = ELF(cfg)  # the ids travel in the state dict
    again.load_state_dict(net.state_dict())
    assert torch.equal(again.vocab_ids, net.vocab_ids)
    full = ELF(
        ELFConfig(
            latent_dim=6, vocab_size=20, hidden=16, depth=1, heads=2, bottleneck=4, max_seq_len=8
        )
    )
    assert full.vocab_ids is None and "vocab_ids" not in full.state_dict()  # the release's layout
    assert torch.equal(full.vocab_index(kept), kept) and torch.equal(full.token_ids(kept), kept)


@pytest.mark.parametrize("decoder_prob", [0.0, 1.0])
def test_a_separate_decoder_trains_only_on_its_own_rows(decoder_prob):
    """separate_decoder (the paper's two-stage ablation): the denoise rows train this network,
    the decode rows a second one of the same size; neither gets a gradient from the other's rows,
    and sampling decodes with the second."""
    torch.manual_seed(0)
    cfg = ELFConfig(
        latent_dim=8,
        vocab_size=11,
        hidden=16,
        depth=1,
        heads=2,
        max_seq_len=8,
        separate_decoder=True,
    )
    m = ELF(cfg)
    assert m.decoder_head is None and m.decoding is m.decoder_net
    assert m.decoder_net.num_params() < m.num_params() < 2 * m.decoder_net.num_params()
    x, tok = torch.randn(6, 5, 8), torch.randint(0, 11, (6, 5))
    loss, _ = elf_loss(
        m,
        x,
        tok,
        torch.ones(6, 5, dtype=torch.bool),
        FlowConfig(decoder_prob=decoder_prob),
        torch.Generator().manual_seed(0),
    )
    loss.backward()
    grads = {n: p.grad for n, p in m.named_parameters()}
    trunk = [g for n, g in grads.items() if not n.startswith("decoder_net.") and g is not None]
    decoder = [g for n, g in grads.items() if n.startswith("decoder_net.") and g is not None]
    if decoder_prob == 0.0:
        assert decoder == [] and sum(float(g.abs().sum()) for g in trunk) > 0
    else:
        assert trunk == [] and sum(float(g.abs().sum()) for g in decoder) > 0
    z = torch.randn(2, 5, 8)
    _, logits = m(
        z,
        torch.ones(2),
        torch.ones(2),
        decode=torch.ones(2, dtype=torch.bool),
        decode_idx=torch.arange(2),
    )
    _, own = m.decoder_net(
        z,
        torch.ones(2),
        torch.ones(2),
        decode=torch.ones(2, dtype=torch.bool),
        decode_idx=torch.arange(2),
    )
    assert torch.equal(logits, own)


def test_learned_embeddings_are_a_trained_table_read_at_unit_scale():
    """embeddings="learned" (the paper's learnable-embeddings ablation): the clean latents are the
    table's rows of the tokens, each at unit RMS, whatever the encoder gave; the flow loss on
    them sends the table gradients, so an optimiser step moves the latents. Without the key the
    encoder's latents pass through untouched."""
    torch.manual_seed(0)
    cfg = ELFConfig(
        latent_dim=8,
        vocab_size=11,
        hidden=16,
        depth=1,
        heads=2,
        max_seq_len=8,
        embeddings="learned",
    )
    m = ELF(cfg)
    x, tok = torch.randn(6, 5, 8), torch.randint(0, 11, (6, 5))
    lat = m.latents(x, tok)
    assert lat.shape == x.shape and not torch.equal(lat, x)
    assert torch.allclose(lat.pow(2).mean(-1), torch.ones(6, 5), atol=1e-4)
    assert torch.equal(lat[0, 0], m.latents(x, tok)[0, 0])  # a row per token id
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    loss, _ = elf_loss(
        m,
        lat,
        tok,
        torch.ones(6, 5, dtype=torch.bool),
        FlowConfig(decoder_prob=0.5),
        torch.Generator().manual_seed(0),
    )
    loss.backward()
    grad = m.embed_table.weight.grad
    assert grad is not None and grad[tok.unique()].abs().sum() > 0
    opt.step()
    assert not torch.allclose(m.latents(x, tok), lat)
    plain = ELF(ELFConfig(latent_dim=8, vocab_size=11, hidden=16, depth=1, heads=2, max_seq_len=8))
    assert plain.embed_table is None and plain.latents(x, tok) is x
    assert "embed_table.weight" not in plain.state_dict()  # the release's layout
    both = ELF(
        ELFConfig(
            latent_dim=8,
            vocab_size=11,
            hidden=16,
            depth=1,
            heads=2,
            max_seq_len=8,
            embeddings="learned",
            separate_decoder=True,
        )
    )
    assert both.decoder_net.embed_table is None  # one table, the flow's
