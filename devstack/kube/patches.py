"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Owns applying a patch body to a copy of an object. Strategic merge knows the merge keys of the
built-in fields tenantdb and kubectl touch (ownerReferences, finalizers, Service ports,
ServiceAccount secrets) and the directives kubectl sends (`$patch`, `$retainKeys`,
`$deleteFromPrimitiveList/…`, `$setElementOrder/…`). It must never mutate its inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from devstack.kube.errors import ApiError

PRIMITIVE_MERGE = "$primitive"
COMMON_SMP: dict[str, str] = {
    "metadata.ownerReferences": "uid",
    "metadata.finalizers": PRIMITIVE_MERGE,
}


def _patch_error(message: str) -> ApiError:
    # The real server keeps the JSON patch library's own words to itself: the Status names no
    # cause. `message` says what failed, for whoever reads the devstack's code.
    del message
    return ApiError(
        422, "Invalid", "the server rejected our request due to an error in our request", {}
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ---------------------------------------------------------------- JSON patch


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _patch_error(f'invalid JSON pointer "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise _patch_error(f'doc is missing path: "{path}": missing value') from exc
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    try:
        return parent[int(parts[-1])] if isinstance(parent, list) else parent[parts[-1]]
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise _patch_error(f'doc is missing path: "{path}": missing value') from exc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    try:
        if isinstance(parent, list):
            return parent.pop(int(parts[-1]))
        return parent.pop(parts[-1])
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise _patch_error(f"unable to remove nonexistent key: {parts[-1]}: missing value") from exc


def _add(doc: Any, path: str, value: Any, *, replace: bool) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    key = parts[-1]
    if isinstance(parent, list):
        pos = len(parent) if key == "-" else int(key)
        if replace:
            parent[pos] = value
        else:
            parent.insert(pos, value)
    elif isinstance(parent, dict):
        if replace and key not in parent:
            raise _patch_error(
                f"replace operation does not apply: doc is missing key: {path}: missing value"
            )
        parent[key] = value
    else:
        raise _patch_error(f'doc is missing path: "{path}": missing value')
    return doc


def _json_patch_op(doc: Any, op: Mapping[str, Any]) -> Any:
    kind = op.get("op")
    path = str(op.get("path", ""))
    if kind == "add":
        return _add(doc, path, copy.deepcopy(op.get("value")), replace=False)
    if kind == "replace":
        return _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
    if kind == "remove":
        _remove(doc, path)
        return doc
    if kind == "test":
        if _get(doc, path) != op.get("value"):
            raise _patch_error(f"testing value {path} failed: test failed")
        return doc
    if kind in ("move", "copy"):
        source = str(op.get("from", ""))
        value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
        return _add(doc, path, value, replace=False)
    raise _patch_error(f"Unexpected kind: {kind}")


def json_patch(target: Any, ops: Any) -> Any:
    """Apply an RFC 6902 JSON patch."""
    if not isinstance(ops, list):
        kind = {dict: "object", str: "string", bool: "bool"}.get(type(ops), "number")
        raise ApiError(
            400,
            "BadRequest",
            f"error decoding patch: json: cannot unmarshal {kind} into Go value of type "
            "[]handlers.jsonPatchOp",
        )
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict):
            raise _patch_error("invalid JSON patch operation")
        doc = _json_patch_op(doc, op)
    return doc


# ---------------------------------------------------------------- strategic merge


def _dotted(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def strategic_merge(original: Any, patch: Any, meta: Mapping[str, str], path: str = "") -> Any:
    """Apply a strategic merge patch; `meta` maps dotted list paths to merge keys."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = copy.deepcopy(original) if isinstance(original, dict) else {}
    if isinstance(patch.get("$retainKeys"), list):
        keep = set(patch["$retainKeys"])
        result = {k: v for k, v in result.items() if k in keep}
    for key, value in patch.items():
        _smp_key(result, key, value, meta, path)
    return result


def _smp_key(
    result: dict[str, Any], key: str, value: Any, meta: Mapping[str, str], path: str
) -> None:
    if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
        return
    if key.startswith("$deleteFromPrimitiveList/"):
        name = key.split("/", 1)[1]
        drop = value if isinstance(value, list) else []
        result[name] = [x for x in result.get(name) or [] if x not in drop]
        return
    sub = _dotted(path, key)
    if value is None:
        result.pop(key, None)
    elif isinstance(value, dict):
        merged = strategic_merge(result.get(key), value, meta, sub)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    elif isinstance(value, list):
        result[key] = _merge_list(result.get(key), value, meta, sub)
    else:
        result[key] = value


def _merge_list(original: Any, patch: list[Any], meta: Mapping[str, str], path: str) -> list[Any]:
    strategy = meta.get(path)
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    base = copy.deepcopy(original) if isinstance(original, list) else []
    if strategy is None:
        return copy.deepcopy(patch)
    if strategy == PRIMITIVE_MERGE:
        return base + [copy.deepcopy(i) for i in patch if i not in base]
    for item in patch:
        if not isinstance(item, dict):
            continue
        found = next(
            (
                i
                for i, o in enumerate(base)
                if isinstance(o, dict) and o.get(strategy) == item.get(strategy)
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if found is not None:
                base.pop(found)
        elif found is None:
            base.append(strategic_merge({}, item, meta, path))
        else:
            base[found] = strategic_merge(base[found], item, meta, path)
    return base
