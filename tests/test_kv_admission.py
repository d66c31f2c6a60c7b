"""How many of a generate call's requests vLLM may run at once (``rollout/admission.py``): as many as its KV cache
holds to their last token, the blocks every prompt shares counted once. The engine side (a real scheduler, no
request preempted) is in the vLLM lane: ``tests/test_vllm_generation.py``."""

from __future__ import annotations

from llm_finetuning.rollout.admission import sequences_cache_holds


def test_smollm2s_evaluation_fits_120_requests_in_a_256_mib_cache():
    """Every prompt opens with the same 64 tokens (two whole blocks, held once); the longest is 91 tokens, and
    with 64 new ones a request spans 5 blocks, 3 of them its own: 361 // 3 of the 363 blocks requests get (the
    cache's 364 less vLLM's null block)."""
    opening = list(range(64))
    prompts = [opening + [1000 + i] * (19 + i % 9) for i in range(400)]
    assert max(map(len, prompts)) == 91
    assert sequences_cache_holds(prompts, 64, blocks=363, block_size=32) == 120


def test_only_whole_shared_blocks_are_held_once():
    shared_63 = [list(range(63)) + [500 + i] for i in range(4)]  # 63 tokens in common: one whole block of 32
    assert sequences_cache_holds(shared_63, 0, blocks=10, block_size=32) == (10 - 1) // 1
    assert sequences_cache_holds(shared_63, 1, blocks=10, block_size=32) == (10 - 1) // 2  # 65 tokens: 3 blocks
    nothing_shared = [[i] + list(range(63)) for i in range(4)]
    assert sequences_cache_holds(nothing_shared, 0, blocks=10, block_size=32) == 10 // 2


def test_a_prompts_draws_share_its_whole_blocks():
    """K samples of one prompt are K requests with the same tokens: its whole blocks are held once."""
    same = [list(range(70))] * 8
    assert sequences_cache_holds(same, 10, blocks=10, block_size=32) == (10 - 2) // (3 - 2)


def test_a_prompts_last_token_is_never_counted_shared():
    """vLLM looks a prompt up in its cache short of its last token, which it computes anew: two identical
    64-token prompts share their first block only."""
    same = [list(range(64))] * 2
    assert sequences_cache_holds(same, 0, blocks=9, block_size=32) == (9 - 1) // 1


def test_a_request_longer_than_the_cache_still_runs_alone():
    assert sequences_cache_holds([list(range(40)), list(range(100, 140))], 1000, blocks=4, block_size=32) == 1
