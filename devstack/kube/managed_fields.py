"""Server-side apply and `metadata.managedFields`, as structured-merge-diff tracks them.

Owns field sets (the `fieldsV1` encoding: `f:` fields, `k:` list-map keys, `v:` set values, `.`
for a node that is itself a member), the comparison of two objects an ordinary update is tracked
by (every node it added, a map or list included, every leaf it changed, every node it removed),
the field set of an applied configuration (leaves, list elements, keys of free-form maps, empty
maps and nulls), the apply merge (granular maps, list-maps merged by key, sets unioned, atomic
lists replaced), conflicts against other managers (409 naming the manager unless forced, the
fields in structured-merge-diff's order), removal of fields an applier stops applying when nobody
else owns them, the metadata fields no manager owns, and ownership transfer on ordinary updates.
It must never touch fields outside the subresource being written.

Deliberately left out: the `before-first-apply` manager for objects created without managed
fields, version conversion of field sets, and `i:` (index) elements, since atomic lists are owned
whole.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from devstack.kube.errors import ApiError

Path = tuple[str, ...]
Schema = dict[str, Any]
_MISSING: Any = object()
_UNTRACKED_META = frozenset(
    "f:" + n
    for n in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ]
)
"""Metadata the server sets: never compared, applied or owned (`generateName` is owned)."""
_INTERIOR: Any = object()
"""The value of a granular map or list node in `node_values`: its children carry the values."""

META_SCHEMA: Schema = {
    "type": "object",
    "properties": {
        "finalizers": {
            "type": "array",
            "x-kubernetes-list-type": "set",
            "items": {"type": "string"},
        },
        "ownerReferences": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"],
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
}


def child(schema: Schema, key: str) -> Schema:
    """Return the schema of a property or map value, `{}` when undeclared."""
    props = schema.get("properties") or {}
    if key in props:
        return dict(props[key])
    extra = schema.get("additionalProperties")
    return dict(extra) if isinstance(extra, dict) else {}


def _list_kind(schema: Schema) -> tuple[str, list[str]]:
    kind = schema.get("x-kubernetes-list-type") or "atomic"
    return str(kind), list(schema.get("x-kubernetes-list-map-keys") or [])


def _key_element(item: dict[str, Any], keys: list[str]) -> str:
    return "k:" + json.dumps({k: item.get(k) for k in sorted(keys)}, separators=(",", ":"))


def field_values(obj: Any, schema: Schema) -> dict[Path, Any]:
    """Map every owned-able path of an object to its value (True for list elements)."""
    out: dict[Path, Any] = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            _collect(value, child(schema, key), ("f:" + key,), out)
    return out


def _collect(value: Any, schema: Schema, path: Path, out: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value and schema.get("x-kubernetes-map-type") != "atomic":
        for key, sub in value.items():
            _collect(sub, child(schema, key), (*path, "f:" + key), out)
        return
    kind, keys = _list_kind(schema)
    if isinstance(value, list) and value and kind in ("set", "map"):
        items: Schema = schema.get("items") or {}
        for item in value:
            if kind == "set":
                out[(*path, "v:" + json.dumps(item, separators=(",", ":")))] = True
            elif isinstance(item, dict):
                element = (*path, _key_element(item, keys))
                out[element] = True
                for key, sub in item.items():
                    _collect(sub, child(items, key), (*element, "f:" + key), out)
        return
    out[path] = value


def node_values(obj: Any, schema: Schema) -> dict[Path, Any]:
    """Map every node of an object to its value, as structured-merge-diff compares objects.

    Granular (non-atomic, non-empty) maps and lists and list-map elements map to `_INTERIOR`;
    leaves (scalars, atomic maps and lists, empty maps and lists, nulls) to their value; set
    elements to True.
    """
    out: dict[Path, Any] = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            _node(value, child(schema, key), ("f:" + key,), out)
    return out


def _node(value: Any, schema: Schema, path: Path, out: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value and schema.get("x-kubernetes-map-type") != "atomic":
        out[path] = _INTERIOR
        for key, sub in value.items():
            _node(sub, child(schema, key), (*path, "f:" + key), out)
        return
    kind, keys = _list_kind(schema)
    if isinstance(value, list) and value and kind in ("set", "map"):
        out[path] = _INTERIOR
        items: Schema = schema.get("items") or {}
        for item in value:
            if kind == "set":
                out[(*path, "v:" + json.dumps(item, separators=(",", ":")))] = True
            elif isinstance(item, dict):
                element = (*path, _key_element(item, keys))
                out[element] = _INTERIOR
                for key, sub in item.items():
                    _node(sub, child(items, key), (*element, "f:" + key), out)
        return
    out[path] = value


@dataclass(frozen=True)
class Comparison:
    """What changed between two objects: nodes added and removed, leaves modified."""

    added: set[Path]
    removed: set[Path]
    modified: set[Path]

    @property
    def changed(self) -> set[Path]:
        """Added or modified: what a write takes from other managers."""
        return self.added | self.modified


def compare(old: dict[Path, Any], new: dict[Path, Any]) -> Comparison:
    """Compare the `node_values` of two objects."""
    modified = {
        p
        for p, v in new.items()
        if p in old and v is not _INTERIOR and old[p] is not _INTERIOR and old[p] != v
    }
    return Comparison(set(new) - set(old), set(old) - set(new), modified)


def applied_set(obj: Any, schema: Schema, untyped_members: bool) -> set[Path]:
    """The fields an applied configuration sets, as structured-merge-diff's `ToFieldSet`.

    Leaves, every list element, the keys of maps with free-form keys (`additionalProperties`,
    and, with `untyped_members`, the undeclared fields of a custom resource), and any field whose
    value is null or an empty map.
    """
    out: set[Path] = set()
    if isinstance(obj, dict):
        _applied_map(obj, schema, (), out, untyped_members)
    return out


def _applied_map(
    value: dict[str, Any], schema: Schema, path: Path, out: set[Path], untyped: bool
) -> None:
    declared = schema.get("properties") or {}
    free_keys = isinstance(schema.get("additionalProperties"), dict) or untyped
    for key, sub in value.items():
        here = (*path, "f:" + key)
        _applied(sub, child(schema, key), here, out, untyped)
        if sub is None or sub == {} or (key not in declared and free_keys):
            out.add(here)


def _applied(value: Any, schema: Schema, path: Path, out: set[Path], untyped: bool) -> None:
    if isinstance(value, dict) and schema.get("x-kubernetes-map-type") != "atomic":
        _applied_map(value, schema, path, out, untyped)
        return
    kind, keys = _list_kind(schema)
    if isinstance(value, list) and kind in ("set", "map"):
        items: Schema = schema.get("items") or {}
        for item in value:
            if kind == "set":
                out.add((*path, "v:" + json.dumps(item, separators=(",", ":"))))
            elif isinstance(item, dict):
                element = (*path, _key_element(item, keys))
                _applied_map(item, items, element, out, untyped)
                out.add(element)
        return
    out.add(path)


def _tracked(path: Path, subresource: str, has_status: bool) -> bool:
    """Whether a write through this endpoint may own the path (reset fields are not)."""
    head = path[0]
    if head in ("f:apiVersion", "f:kind"):
        return False
    if head == "f:metadata" and (len(path) == 1 or path[1] in _UNTRACKED_META):
        return False
    return not has_status or (head == "f:status") == (subresource == "status")


def scope_paths(values: dict[Path, Any], subresource: str, has_status: bool) -> dict[Path, Any]:
    """Keep the paths a write through this endpoint may own."""
    return {p: v for p, v in values.items() if _tracked(p, subresource, has_status)}


# ---------------------------------------------------------------- fieldsV1 encoding


def decode(trie: dict[str, Any], prefix: Path = ()) -> set[Path]:
    """Turn a `fieldsV1` trie into a set of paths."""
    out: set[Path] = set()
    for key, sub in trie.items():
        if key == ".":
            out.add(prefix)
        elif sub:
            out |= decode(sub, (*prefix, key))
        else:
            out.add((*prefix, key))
    return out


def encode(paths: set[Path]) -> dict[str, Any]:
    """Turn a set of paths into a `fieldsV1` trie."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    for path in paths:
        node = root
        for element in path:
            node = node[element]
        if node and "." not in node:
            node["."] = {}
    return root


def path_text(path: Path) -> str:
    """Print a path as structured-merge-diff does in conflict messages."""
    out = []
    for element in path:
        kind, body = element[:2], element[2:]
        if kind == "f:":
            out.append("." + body)
        elif kind == "k:":
            keys = json.loads(body)
            out.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]")
        elif kind == "v:":
            out.append(f"[={body}]")
        else:
            out.append(f"[{body}]")
    return "".join(out)


# ---------------------------------------------------------------- manager entries


@dataclass
class Entry:
    """One `managedFields` entry."""

    manager: str
    operation: str
    api_version: str
    time: str
    subresource: str = ""
    paths: set[Path] = field(default_factory=set)

    def same_owner(self, manager: str, operation: str, subresource: str) -> bool:
        """Tell whether this entry belongs to that manager, operation and subresource."""
        return (self.manager, self.operation, self.subresource) == (manager, operation, subresource)

    def to_json(self) -> dict[str, Any]:
        """Render the entry for `metadata.managedFields`."""
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(self.paths),
        }
        if self.time:
            out["time"] = self.time
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def read_entries(obj: dict[str, Any] | None) -> list[Entry]:
    """Parse an object's `metadata.managedFields`."""
    if not obj:
        return []
    entries = []
    for raw in obj.get("metadata", {}).get("managedFields") or []:
        entries.append(
            Entry(
                manager=str(raw.get("manager", "")),
                operation=str(raw.get("operation", "Update")),
                api_version=str(raw.get("apiVersion", "")),
                time=str(raw.get("time", "")),
                subresource=str(raw.get("subresource", "")),
                paths=decode(raw.get("fieldsV1") or {}),
            )
        )
    return entries


def write_entries(obj: dict[str, Any], entries: list[Entry]) -> None:
    """Store entries in `metadata.managedFields`, dropping empty ones."""
    kept = [e.to_json() for e in entries if e.paths]
    meta = obj.setdefault("metadata", {})
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)


def _entry_for(
    entries: list[Entry], manager: str, operation: str, sub: str, stamp: tuple[str, str]
) -> Entry:
    for entry in entries:
        if entry.same_owner(manager, operation, sub):
            entry.api_version, entry.time = stamp
            return entry
    entry = Entry(manager, operation, stamp[0], stamp[1], sub)
    entries.append(entry)
    return entry


@dataclass(frozen=True)
class Scope:
    """Which part of an object a write may own."""

    schema: Schema
    subresource: str
    has_status: bool
    untyped_members: bool = False
    """Undeclared fields are members of the applied set (custom resources' unknown fields)."""

    def values(self, obj: Any) -> dict[Path, Any]:
        """Leaf values of an object within this scope."""
        return scope_paths(field_values(obj, self.schema), self.subresource, self.has_status)

    def nodes(self, obj: Any) -> dict[Path, Any]:
        """Every node of an object within this scope (see `node_values`)."""
        if not obj:
            return {}
        return scope_paths(node_values(obj, self.schema), self.subresource, self.has_status)

    def applied(self, obj: Any) -> set[Path]:
        """The fields an applied configuration sets within this scope."""
        found = applied_set(obj, self.schema, self.untyped_members)
        return {p for p in found if _tracked(p, self.subresource, self.has_status)}


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    scope: Scope,
    stamp: tuple[str, str],
    zero: dict[str, Any] | None = None,
) -> None:
    """Move ownership of what an ordinary write added or changed to its manager.

    As structured-merge-diff tracks an update: every other manager loses the fields the write
    added, changed or removed; the writer keeps what it owned minus the removed fields and
    gains the rest (its entry's time moves only when it gains something). A create (`old`
    None) is compared with the kind's empty object, `zero`.
    """
    entries = read_entries(old)
    diff = compare(scope.nodes(old if old else zero), scope.nodes(new))
    for entry in entries:
        entry.paths -= diff.changed | diff.removed
    if diff.changed:
        _entry_for(entries, manager, "Update", scope.subresource, stamp).paths |= diff.changed
    write_entries(new, entries)


def created_entries(
    body: dict[str, Any],
    zero: dict[str, Any],
    manager: str,
    subresource: str,
    stamp: tuple[str, str],
) -> list[dict[str, Any]]:
    """The managedFields the real server shows on an object it creates and never stores (an
    access review, a TokenReview, a TokenRequest): one Update entry owning what `body` sets
    beyond the kind's zero value `zero` (the structs that are always there, such as `spec`).
    Empty strings, empty lists and nulls count as unset, as Go's `omitempty` drops them."""
    scope = Scope({}, "", has_status=False)
    diff = compare(scope.nodes(zero), scope.nodes(_set_values(body)))
    if not diff.changed:
        return []
    return [Entry(manager, "Update", *stamp, subresource, diff.changed).to_json()]


def _set_values(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _set_values(v) for k, v in value.items() if v not in ("", [], None)}
    return value


# ---------------------------------------------------------------- apply


def _manager_label(entry: Entry) -> str:
    text = json.dumps(entry.manager)
    if entry.subresource:
        text += f" with subresource {json.dumps(entry.subresource)}"
    if entry.operation == "Update":
        text += f" using {entry.api_version}"
    return text


def _conflict_error(conflicts: list[tuple[Entry, Path]]) -> ApiError:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_manager_label(e)}",
            "field": path_text(p),
        }
        for e, p in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        label = _manager_label(entry)
        message = f"Apply failed with 1 conflict: conflict with {label}: {path_text(path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(_manager_label(entry), []).append(path_text(path))
        lines = []
        for label in sorted(by_manager):
            lines.append(f"conflicts with {label}:")
            lines += [f"- {p}" for p in by_manager[label]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def _merge(live: Any, applied: Any, schema: Schema) -> Any:
    if (
        isinstance(applied, dict)
        and isinstance(live, dict)
        and schema.get("x-kubernetes-map-type") != "atomic"
    ):
        out = dict(live)
        for key, value in applied.items():
            out[key] = _merge(live.get(key), value, child(schema, key))
        return out
    kind, keys = _list_kind(schema)
    if isinstance(applied, list) and isinstance(live, list) and kind == "set":
        return copy.deepcopy(live) + [copy.deepcopy(i) for i in applied if i not in live]
    if isinstance(applied, list) and isinstance(live, list) and kind == "map":
        items: Schema = schema.get("items") or {}
        result = copy.deepcopy(live)
        index = {_key_element(i, keys): n for n, i in enumerate(result) if isinstance(i, dict)}
        for item in applied:
            if not isinstance(item, dict):
                continue
            pos = index.get(_key_element(item, keys))
            if pos is None:
                result.append(copy.deepcopy(item))
            else:
                result[pos] = _merge(result[pos], item, items)
        return result
    return copy.deepcopy(applied)


def _remove_path(obj: Any, path: Path) -> None:
    node = obj
    for element in path[:-1]:
        node = _step(node, element)
        if node is None:
            return
    last = path[-1]
    if isinstance(node, dict) and last.startswith("f:"):
        node.pop(last[2:], None)
    elif isinstance(node, list):
        node[:] = [i for i in node if not _element_matches(i, last)]


def _element_matches(item: Any, element: str) -> bool:
    if element.startswith("v:"):
        return bool(json.dumps(item, separators=(",", ":")) == element[2:])
    if element.startswith("k:") and isinstance(item, dict):
        keys = json.loads(element[2:])
        return all(item.get(k) == v for k, v in keys.items())
    return False


def _step(node: Any, element: str) -> Any:
    if element.startswith("f:"):
        return node.get(element[2:]) if isinstance(node, dict) else None
    if isinstance(node, list):
        return next((i for i in node if _element_matches(i, element)), None)
    return None


def _prefixes(paths: set[Path]) -> set[Path]:
    out: set[Path] = set()
    for path in paths:
        for n in range(1, len(path) + 1):
            out.add(path[:n])
    return out


def apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    manager: str,
    force: bool,
    scope: Scope,
    stamp: tuple[str, str],
) -> dict[str, Any]:
    """Merge an applied configuration into the live object, tracking ownership.

    The applier's fields become exactly those its configuration sets; fields it applied last
    time and no longer does are removed unless another manager owns them; what the merge adds
    or changes that another manager owns is a conflict, and what it removes leaves every owner.

    Raises:
        ApiError: 409 naming the other managers when the apply conflicts and is not forced.
    """
    entries = read_entries(live)
    wanted = scope.applied(applied)
    me = next((e for e in entries if e.same_owner(manager, "Apply", scope.subresource)), None)
    if me is None:
        me = Entry(manager, "Apply", *stamp, scope.subresource)
    others = [e for e in entries if e is not me]
    merged = _merge(copy.deepcopy(live) if live else {}, applied, scope.schema)
    keep = _prefixes(set().union(wanted, *(e.paths for e in others)))
    for path in sorted(me.paths - wanted, key=len, reverse=True):
        if path not in keep:
            _remove_path(merged, path)
    diff = compare(scope.nodes(live), scope.nodes(merged))
    taken_over = _taken_over_from_last_applied(live, scope.values(live) if live else {}, scope)
    conflicts = [(e, p) for e in others for p in smd_order(e.paths & diff.changed)]
    blocking = [(e, p) for e, p in conflicts if p not in taken_over]
    if blocking and not force:
        raise _conflict_error(blocking)
    for entry, path in conflicts:
        entry.paths.discard(path)
    for entry in others:
        entry.paths -= diff.removed
    me.paths = wanted
    me.api_version = stamp[0]
    if _content(merged) != _content(live or {}):
        # An apply that leaves the object as it was does not move its manager's time (a new
        # manager then has none), as the real server's managed-fields updater does.
        me.time = stamp[1]
    elif me not in entries:
        me.time = ""
    if me not in entries:
        entries.append(me)
    _sync_last_applied(merged, live, applied, manager)
    write_entries(merged, entries)
    return dict(merged)


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _element_order(element: str) -> tuple[int, str]:
    return ("f:k:v:i:".index(element[:2]) // 2, element[2:])


def smd_order(paths: set[Path]) -> list[Path]:
    """Paths in the order structured-merge-diff iterates a set: at each level the members
    first, then the children, each sorted (field names before keys before values)."""
    members = sorted((p for p in paths if len(p) == 1), key=lambda p: _element_order(p[0]))
    heads = sorted({p[0] for p in paths if len(p) > 1}, key=_element_order)
    out: list[Path] = list(members)
    for head in heads:
        out += [
            (head, *rest)
            for rest in smd_order({p[1:] for p in paths if len(p) > 1 and p[0] == head})
        ]
    return out


def _sync_last_applied(
    merged: dict[str, Any], live: dict[str, Any] | None, applied: dict[str, Any], manager: str
) -> None:
    # kubectl's server-side apply keeps a client-side apply's annotation in step (when there is
    # one), so a later client-side apply computes its patch from what was applied last.
    if manager == "kubectl" and live and LAST_APPLIED in _annotations(live):
        merged.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED] = json.dumps(
            applied, separators=(",", ":"), sort_keys=True
        )


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""The annotation a client-side ``kubectl apply`` keeps the applied configuration in."""


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations if isinstance(annotations, dict) else {}


def _taken_over_from_last_applied(
    live: dict[str, Any] | None, live_values: dict[Path, Any], scope: Scope
) -> set[Path]:
    """The fields an apply may take over from a client-side apply without a conflict.

    As the real API server does, so that ``kubectl apply --server-side`` succeeds on an object
    ``kubectl apply`` made: the fields of the last-applied annotation whose live value is still
    the one it records (nobody changed them since).
    """
    text = _annotations(live or {}).get(LAST_APPLIED)
    if not isinstance(text, str):
        return set()
    try:
        last = json.loads(text)
    except ValueError:
        return set()
    if not isinstance(last, dict):
        return set()
    recorded = scope.values(last)
    return {p for p, v in recorded.items() if live_values.get(p, _MISSING) == v}
