"""Which of reasoning-gym's tasks a run may use, and why the others are refused: an allow-list, reviewed task by
task against the locked release (``REVIEWED_RELEASE``).

A task's verifier runs on text a model wrote. Each task below was read, and its verifier run on hostile answers
shaped as its answers are (``tests/test_red_team.py`` runs every allowed task's verifier on them in the
sandbox and checks that no model text reaches ``eval``, ``exec``, ``compile`` or sympy's ``parse_expr``):

- ``PARSED_NOT_EVALUATED``: the verifiers that hand the answer to ``eval`` (a list written as a Python literal)
  or to sympy's ``parse_expr``. In the sandbox's copy of a worker those names are parsers
  (``sandbox/parsers.py``), so these verifiers score answers on data, with their own logic unchanged;
- ``NEEDS_FIXED_HASH_SEED``: tasks whose problems depend on Python's hash seed (their generators iterate over
  sets). The verifier's worker rebuilds a problem from its seed and index, and under another hash seed it
  builds another problem than the one the model saw; with ``PYTHONHASHSEED`` set, trainer and worker agree;
- ``REFUSED``: never, with the reason.

A task that is not in ``ALLOWED`` (a newer release's) is refused until it is reviewed.

    >>> refusal("chain_sum") is None, refusal("composite").split(":")[0]
    (True, 'refused')
"""

from __future__ import annotations

import importlib.metadata
import os

__all__ = ["ALLOWED", "NEEDS_FIXED_HASH_SEED", "PARSED_NOT_EVALUATED", "REFUSED", "REVIEWED_RELEASE", "refusal"]

REVIEWED_RELEASE = "0.1.25"
PARSED_NOT_EVALUATED = {
    "spiral_matrix": "eval", "binary_matrix": "eval", "string_insertion": "eval", "n_queens": "eval",
    "countdown": "parse_expr", "puzzle24": "parse_expr", "simple_integration": "parse_expr",
    "intermediate_integration": "parse_expr", "polynomial_multiplication": "parse_expr",
}  # fmt: skip
NEEDS_FIXED_HASH_SEED = frozenset({
    "isomorphic_strings", "knight_swap", "polynomial_multiplication", "ransom_note", "word_ladder",
})  # fmt: skip
REFUSED = {
    "composite": "its verifier hands each answer to other tasks named in its settings, which this review "
    "cannot see; name those tasks directly (data.reasoning_gym.settings per task)",
}
ALLOWED = frozenset({
    "ab", "acre", "advanced_geometry", "aiw", "arc_1d", "arc_agi", "base_conversion", "basic_arithmetic", "bf",
    "binary_alternation", "binary_matrix", "bitwise_arithmetic", "boxnet", "caesar_cipher", "calendar_arithmetic",
    "chain_sum", "circuit_logic", "codeio", "coin_flip", "color_cube_rotation", "complex_arithmetic",
    "count_bits", "count_primes", "countdown", "course_schedule", "cryptarithm", "decimal_arithmetic",
    "decimal_chain_sum", "dice", "emoji_mystery", "family_relationships", "figlet_font",
    "fraction_simplification", "futoshiki", "game_of_life", "game_of_life_halting", "gcd", "graph_color",
    "group_anagrams", "gsm_symbolic", "intermediate_integration", "isomorphic_strings", "jugs", "kakurasu",
    "knight_swap", "knights_knaves", "largest_island", "lcm", "leg_counting", "letter_counting", "letter_jumble",
    "list_functions", "mahjong_puzzle", "manipulate_matrix", "maze", "mini_sudoku", "modulo_grid", "n_queens",
    "needle_haystack", "number_filtering", "number_format", "number_sequence", "number_sorting",
    "palindrome_generation", "palindrome_partitioning", "path_star", "polynomial_equations",
    "polynomial_multiplication", "pool_matrix", "power_function", "prime_factorization", "products",
    "propositional_logic", "puzzle24", "quantum_lock", "ransom_note", "rearc", "rectangle_count",
    "rotate_matrix", "rotten_oranges", "rubiks_cube", "rush_hour", "self_reference", "sentence_reordering",
    "shortest_path", "simple_equations", "simple_geometry", "simple_integration", "sokoban", "spell_backward",
    "spiral_matrix", "string_insertion", "string_manipulation", "string_splitting", "string_synthesis",
    "sudoku", "survo", "syllogism", "time_intervals", "tower_of_hanoi", "tsumego", "word_ladder",
    "word_sequence_reversal", "word_sorting", "zebra_puzzles",
})  # fmt: skip


def refusal(task: str) -> str | None:
    """Why a run may not use ``task`` (one line with the fix; the caller names the task), or None when it may."""
    if task in REFUSED:
        return f"refused: {REFUSED[task]}"
    if task not in ALLOWED:
        return (f"refused: its verifier has not been reviewed for running on model text (this project reviewed "
                f"reasoning-gym {REVIEWED_RELEASE}, installed: {_installed()}); use a reviewed task")  # fmt: skip
    if task in NEEDS_FIXED_HASH_SEED and os.environ.get("PYTHONHASHSEED", "random") == "random":
        return ("refused without a fixed hash seed: its problems depend on Python's hash seed, so the verifier's "
                "worker would judge another problem than the model's; run with PYTHONHASHSEED=0 (any number)")
    return None


def _installed() -> str:
    try:
        return importlib.metadata.version("reasoning-gym")
    except importlib.metadata.PackageNotFoundError:
        return "none"
