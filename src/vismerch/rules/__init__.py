"""Merchandising rules: kinds (``rules.kinds``, the one registry), the rule and its
validation (``rules.model``), storage (``rules.storage``), resolution on a page
(``rules.resolve``), conflicts found before saving (``rules.conflicts``) and dated rules
applied to a published grid at read time (``rules.schedule``). See docs/rules.md."""

from vismerch.rules.kinds import KINDS, OOS_POLICIES, OUT_OF_STOCK, RuleKind, get_kind, kind_names, register
from vismerch.rules.model import REACHES, Rule, applies_to, parse_stamp, validate
from vismerch.rules.resolve import Resolution, resolve
from vismerch.rules.storage import (
    add_rule,
    get_rule,
    list_rules,
    log_events,
    remove_rule,
    revert_substitution,
    reverted_pins,
    rule_log,
    set_enabled,
    update_rule,
)

__all__ = ["KINDS", "OOS_POLICIES", "OUT_OF_STOCK", "REACHES", "Resolution", "Rule", "RuleKind",
           "add_rule", "applies_to", "get_kind", "get_rule", "kind_names", "list_rules",
           "log_events", "parse_stamp", "register", "remove_rule", "resolve", "revert_substitution",
           "reverted_pins", "rule_log", "set_enabled", "update_rule", "validate"]
