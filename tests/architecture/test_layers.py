"""The data dependencies run the way the imports do (DESIGN.md "Layout", .importlinter).

lint-imports holds the import graph to the layers: controlplane wires everything on
top, then agents -> approvals -> audit. Django can draw the model graph around that
(a foreign key by label, `apps.get_model` at run time, a migration depending on
another app), so these tests hold it to the same order:

- no model points at a model of a higher layer, unless that model is swappable and
  the relation names its setting (as `AUTH_USER_MODEL` is named: APPROVALS_AGENT_MODEL);
- no code or migration of a lower layer names a higher layer's models or migrations by
  label, and no app code looks a model up by another app's label (`apps.get_model`);
- the contract that keeps apps off the site's wiring names every module of the site
  but its HTTP plumbing, so a new module is forbidden until someone decides otherwise.
"""

from __future__ import annotations

import ast
import configparser
import pkgutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.test.utils import isolate_apps

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = configparser.ConfigParser()
CONTRACTS.read(ROOT / ".importlinter")


def _contract_list(contract: str, key: str) -> list[str]:
    return CONTRACTS[f"importlinter:contract:{contract}"][key].split()


# Highest first. The site's wiring sits above every app; below it, the one-way layers.
LAYERS = ["controlplane", *(name for name in _contract_list("one-way", "layers") if apps.is_installed(name))]
RANK = {label: rank for rank, label in enumerate(LAYERS)}
# The one part of the site every app may import (it imports none of them).
PLUMBING = "controlplane.http"
PACKAGES = [*LAYERS, *(name for name in _contract_list("one-way", "layers") if name not in LAYERS)]


def higher_than(label: str) -> list[str]:
    return LAYERS[: RANK[label]]


def model_labels(app_label: str) -> set[str]:
    """Every model label of an app, lower-cased ("agents.agent"), auto-created ones too."""
    config = apps.get_app_config(app_label)
    return {model._meta.label_lower for model in config.get_models(include_auto_created=True)}


# --- The model graph ------------------------------------------------------------------------


def forward_relations(model: type[models.Model]) -> Iterator[models.Field | GenericForeignKey]:
    """The relations a model declares (FK, one-to-one, many-to-many, generic), not the reverse ones."""
    for field in model._meta.get_fields(include_hidden=True):
        if field.is_relation and not field.auto_created:
            yield field


def upward_relations(candidates: Iterable[type[models.Model]]) -> list[str]:
    """Each relation from a model to a model of a higher layer not named through a swappable setting."""
    found = []
    for model in candidates:
        source = model._meta.app_label
        if source not in RANK:
            continue
        for field in forward_relations(model):
            where = f"{model._meta.label}.{field.name}"
            if isinstance(field, GenericForeignKey):
                found.append(f"{where}: a generic relation may point at any layer; name the model")
                continue
            target = field.related_model._meta
            if target.app_label not in higher_than(source):
                continue
            setting = getattr(field, "swappable_setting", None)
            if not (target.swappable and setting == target.swappable):
                found.append(f"{where} -> {target.label}: {target.app_label} is a higher layer than {source}")
    return found


def test_no_model_points_at_a_higher_layer_except_through_a_swappable_setting():
    assert upward_relations(apps.get_models(include_auto_created=True)) == []


def test_the_agent_model_is_named_by_its_setting():
    from agents.models import Agent
    from approvals.agents import get_agent_model
    from approvals.models import ApprovalRequest, EmergencyStop

    assert get_agent_model() is Agent and Agent._meta.swappable == "APPROVALS_AGENT_MODEL"
    for field in (ApprovalRequest._meta.get_field("agent"), EmergencyStop._meta.get_field("agent")):
        assert field.swappable_setting == "APPROVALS_AGENT_MODEL"


# --- What the source names --------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    package: str  # the project package (and app label) the file belongs to
    path: Path
    tree: ast.Module

    @property
    def is_migration(self) -> bool:
        return "migrations" in self.path.relative_to(ROOT).parts

    def where(self, node: ast.AST) -> str:
        return f"{self.path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"


def package_path(package: str) -> Path:
    return Path(apps.get_app_config(package).path) if apps.is_installed(package) else ROOT / "clients/python" / package


def modules() -> Iterator[Module]:
    for package in PACKAGES:
        for path in sorted(package_path(package).rglob("*.py")):
            yield Module(package, path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))


def string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def bare_strings(tree: ast.Module) -> set[int]:
    """The ids of docstrings and other bare string statements: prose, not references."""
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and string(node.value)}


def get_model_label(node: ast.Call) -> str | None:
    """The app label a `get_model("app", "Model")` / `get_model("app.Model")` call names literally."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    first = string(node.args[0]) if name == "get_model" and node.args else None
    return first.split(".", 1)[0] if first else None


def labels_naming_higher_layers(module: Module) -> Iterator[str]:
    """Where a lower layer names a higher one: a model label ("agents.Agent"), a migration
    dependency ("agents", "0001_initial"), a historical or run-time model lookup."""
    higher = higher_than(module.package) if module.package in RANK else []
    labels = {label: app for app in higher for label in model_labels(app)}
    prose = bare_strings(module.tree)
    for node in ast.walk(module.tree):
        text = string(node)
        if text is not None and id(node) not in prose and text.lower() in labels:
            yield f"{module.where(node)}: names {text!r} of {labels[text.lower()]}"
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and string(node.elts[0]) in higher:
            if string(node.elts[1]) is not None:
                yield f"{module.where(node)}: depends on {string(node.elts[0])!r} (a higher layer) by name"
        elif isinstance(node, ast.Call) and get_model_label(node) in higher:
            yield f"{module.where(node)}: looks up a model of {get_model_label(node)!r} (a higher layer)"


def lookups_across_apps(module: Module) -> Iterator[str]:
    """`apps.get_model("<another app>", ...)` outside migrations: import the model, or invert the
    dependency (a setting, a registry such as audit.subjects)."""
    if module.is_migration:
        return
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call):
            label = get_model_label(node)
            if label is not None and label != module.package:
                yield f"{module.where(node)}: apps.get_model({label!r}, ...) reaches into another app"


def imports_of_higher_layers(module: Module) -> Iterator[str]:
    """Imports of a higher layer, those under `if TYPE_CHECKING:` included (import-linter
    leaves those out: exclude_type_checking_imports); type with a Protocol instead."""
    higher = higher_than(module.package) if module.package in RANK else []
    for node in ast.walk(module.tree):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if name.split(".", 1)[0] in higher and not f"{name}.".startswith(f"{PLUMBING}."):
                yield f"{module.where(node)}: imports {name} (a higher layer)"


def test_no_lower_layer_imports_a_higher_one_even_for_type_checking():
    assert [finding for module in modules() for finding in imports_of_higher_layers(module)] == []


def test_no_lower_layer_names_a_higher_layer_by_label():
    assert [finding for module in modules() for finding in labels_naming_higher_layers(module)] == []


def test_no_app_code_looks_up_another_apps_model_by_label():
    assert [finding for module in modules() for finding in lookups_across_apps(module)] == []


# --- The scans find what they look for (so an empty list means something) ---------------------

BAD_MODEL = '''
from typing import TYPE_CHECKING

from django.db import models
from django.apps import apps

if TYPE_CHECKING:
    from agents.models import Agent


class Stop(models.Model):
    """Names "agents.Agent" in prose only."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE)


def agent_class():
    return apps.get_model("agents", "Agent")
'''

BAD_MIGRATION = """
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]
"""


def test_the_scans_catch_an_import_a_label_a_dependency_and_a_lookup():
    model = Module("approvals", ROOT / "approvals/models/stop.py", ast.parse(BAD_MODEL))
    migration = Module("approvals", ROOT / "approvals/migrations/0099_stop.py", ast.parse(BAD_MIGRATION))
    assert sorted(finding.split(": ", 1)[1] for finding in labels_naming_higher_layers(model)) == [
        "looks up a model of 'agents' (a higher layer)",
        "names 'agents.Agent' of agents",
    ]
    assert [finding.split(": ", 1)[1] for finding in imports_of_higher_layers(model)] == [
        "imports agents.models (a higher layer)"
    ]
    assert [finding.split(": ", 1)[1] for finding in lookups_across_apps(model)] == [
        "apps.get_model('agents', ...) reaches into another app"
    ]
    assert [finding.split(": ", 1)[1] for finding in labels_naming_higher_layers(migration)] == [
        "depends on 'agents' (a higher layer) by name"
    ]
    # Up the layers is fine: the agents app may name approvals' models and migrations.
    assert list(labels_naming_higher_layers(Module("agents", migration.path, ast.parse(BAD_MIGRATION)))) == []


@isolate_apps("approvals")
def test_a_relation_up_the_layers_is_found():
    from agents.models import Agent, AgentToken

    class Stop(models.Model):
        token = models.ForeignKey(AgentToken, on_delete=models.CASCADE, related_name="+")
        tokens = models.ManyToManyField(AgentToken, related_name="+")
        agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")  # swappable: allowed here
        kind = models.ForeignKey(ContentType, on_delete=models.CASCADE, related_name="+")  # contrib: allowed
        object_id = models.PositiveIntegerField()
        subject = GenericForeignKey("kind", "object_id")

        class Meta:
            app_label = "approvals"

    assert upward_relations([Stop]) == [
        "approvals.Stop.token -> agents.AgentToken: agents is a higher layer than approvals",
        "approvals.Stop.tokens -> agents.AgentToken: agents is a higher layer than approvals",
        "approvals.Stop.subject: a generic relation may point at any layer; name the model",
    ]


# --- The import contracts cover the site ------------------------------------------------------


def test_apps_are_kept_off_every_module_of_the_site_but_its_http_plumbing():
    """A new module under controlplane/ is wiring until someone decides it is plumbing."""
    site = {f"controlplane.{info.name}" for info in pkgutil.iter_modules([str(ROOT / "controlplane")])}
    forbidden = set(_contract_list("wiring-on-top", "forbidden_modules"))
    assert forbidden == site - {PLUMBING}
    assert set(_contract_list("wiring-on-top", "source_modules")) == set(LAYERS) - {"controlplane"}
