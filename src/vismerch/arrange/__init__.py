"""Arranging a collection's grid: the engine, its greedy search, business scores, layout of
one collection with its rules, explanations, previews and versions."""
