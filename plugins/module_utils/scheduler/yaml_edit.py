# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Surgical edits of block-style YAML (static pod manifests) that leave untouched lines byte-for-byte.

Why not load-modify-dump: re-emitting a manifest reorders keys, drops comments and changes
quoting, so every run would show a diff of the whole file, kubelet would see a "new" manifest
and "absent" could not give back the original bytes. Instead each edit is a line-level
insertion or deletion whose position and indentation come from PyYAML's node marks
(``yaml.compose``), so only the lines that carry the change differ.

Every edit is described twice: on the parsed document (the intended result) and on the text.
After all edits the text is parsed again and must equal the intended document; if it does
not (flow-style or otherwise unusual YAML this editor does not handle), the caller gets the
intended document re-emitted by ``yaml.safe_dump`` and ``reemitted=True`` so it can say so.

Pure logic, no Ansible import; Python 3.9 compatible.
"""

from __future__ import annotations

import copy
import json
import re

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - reported by the module with missing_required_lib
    yaml = None
    HAS_YAML = False


class CannotEdit(Exception):
    """This YAML text cannot be edited surgically at this spot (the caller falls back)."""


_PLAIN_SAFE = re.compile(r"^[A-Za-z0-9/_.=@%+-][A-Za-z0-9/_.=@%+,:~-]*$")


def scalar(value):
    """Render a scalar for a block YAML line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _PLAIN_SAFE.fullmatch(text) and not text.endswith(":") and yaml.safe_load(text) == text:
        return text
    if not text.isprintable():
        # A single-quoted scalar folds a line break into a space and cannot escape control
        # characters; a double-quoted one (JSON's escapes are YAML's) reads back as written.
        return json.dumps(text)
    return "'" + text.replace("'", "''") + "'"


# --- ops: each knows how to change the parsed document and the text ------------------------------


class Op:
    def apply_doc(self, doc):  # pragma: no cover - interface
        raise NotImplementedError

    def apply_text(self, editor):  # pragma: no cover - interface
        raise NotImplementedError


def _resolve(doc, path):
    node = doc
    for part in path:
        node = node[part]
    return node


class SeqAppend(Op):
    """Append ``item`` to the list at ``path + [key]`` (creating the key when missing).

    With ``sorted_from`` set, a scalar item is inserted before the first item (from that index
    on) that sorts after it, when those items are already sorted (kubeadm sorts its flags).
    """

    def __init__(self, path, key, item, sorted_from=None):
        self.path, self.key, self.item, self.sorted_from = list(path), key, item, sorted_from

    def _index(self, seq):
        if self.sorted_from is None or not isinstance(self.item, str):
            return len(seq)
        tail = seq[self.sorted_from :]
        if not all(isinstance(x, str) for x in tail) or tail != sorted(tail):
            return len(seq)
        for offset, value in enumerate(tail):
            if value > self.item:
                return self.sorted_from + offset
        return len(seq)

    def apply_doc(self, doc):
        parent = _resolve(doc, self.path)
        seq = parent.get(self.key)
        if seq is None:
            parent[self.key] = [copy.deepcopy(self.item)]
        else:
            seq.insert(self._index(seq), copy.deepcopy(self.item))

    def apply_text(self, editor):
        parent_node = editor.node(self.path)
        value_node = editor.map_value(parent_node, self.key)
        if value_node is None or (isinstance(value_node, yaml.ScalarNode) and value_node.value in ("", "null", "~")):
            if value_node is not None:
                editor.remove_key(parent_node, self.key)
                parent_node = editor.node(self.path)
            editor.insert_key(parent_node, self.key, [self.item])
            return
        if not isinstance(value_node, yaml.SequenceNode) or value_node.flow_style or not value_node.value:
            raise CannotEdit(f"{self.key} is not a non-empty block sequence")
        seq = editor.construct(value_node)
        editor.insert_seq_item(value_node, self._index(seq), self.item)


class SeqRemove(Op):
    """Remove the items of the list at ``path + [key]`` for which ``match(item)`` is true.

    ``drop_key_if_empty`` also removes the key when nothing is left (the key was ours).
    """

    def __init__(self, path, key, match, drop_key_if_empty=False):
        self.path, self.key, self.match, self.drop = list(path), key, match, drop_key_if_empty

    def apply_doc(self, doc):
        parent = _resolve(doc, self.path)
        seq = parent.get(self.key)
        if not isinstance(seq, list):
            return
        kept = [x for x in seq if not self.match(x)]
        if not kept and self.drop:
            del parent[self.key]
        else:
            parent[self.key] = kept

    def apply_text(self, editor):
        while True:
            parent_node = editor.node(self.path)
            seq_node = editor.map_value(parent_node, self.key)
            if not isinstance(seq_node, yaml.SequenceNode):
                return
            items = [editor.construct(n) for n in seq_node.value]
            hits = [i for i, item in enumerate(items) if self.match(item)]
            if not hits:
                return
            if len(items) == 1:
                if not self.drop:
                    raise CannotEdit(f"removing the last item of {self.key} would leave an empty key")
                editor.remove_key(parent_node, self.key)
                return
            if seq_node.flow_style:
                raise CannotEdit(f"{self.key} is a flow sequence")
            editor.remove_seq_item(seq_node, hits[0])


class KeySet(Op):
    """Set ``path[key] = value``: replace a one-line scalar or insert the key."""

    def __init__(self, path, key, value):
        self.path, self.key, self.value = list(path), key, value

    def apply_doc(self, doc):
        parent = _resolve(doc, self.path)
        if parent is None:
            raise CannotEdit("missing mapping")
        parent[self.key] = copy.deepcopy(self.value)

    def apply_text(self, editor):
        parent_node = editor.node(self.path)
        value_node = editor.map_value(parent_node, self.key)
        if value_node is None:
            editor.insert_key(parent_node, self.key, self.value)
        elif isinstance(value_node, yaml.ScalarNode) and not isinstance(self.value, (dict, list)):
            editor.replace_scalar(value_node, self.value)
        else:
            editor.remove_key(parent_node, self.key)
            editor.insert_key(editor.node(self.path), self.key, self.value)


class KeyRemove(Op):
    """Delete ``path[key]``; with ``drop_parent_if_empty`` also the parent key when it empties."""

    def __init__(self, path, key, drop_parent_if_empty=False):
        self.path, self.key, self.drop_parent = list(path), key, drop_parent_if_empty

    def apply_doc(self, doc):
        parent = _resolve(doc, self.path)
        if isinstance(parent, dict):
            parent.pop(self.key, None)
            if self.drop_parent and not parent and self.path:
                grand = _resolve(doc, self.path[:-1])
                del grand[self.path[-1]]

    def apply_text(self, editor):
        parent_node = editor.node(self.path)
        if not isinstance(parent_node, yaml.MappingNode) or editor.map_value(parent_node, self.key) is None:
            return
        if self.drop_parent and len(parent_node.value) == 1 and self.path:
            editor.remove_key(editor.node(self.path[:-1]), self.path[-1])
        else:
            editor.remove_key(parent_node, self.key)


# --- the text editor -------------------------------------------------------------------------------


class Editor:
    def __init__(self, text):
        self.text = text
        self._parse()

    def _parse(self):
        try:
            self.root = yaml.compose(self.text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            raise CannotEdit(f"intermediate text does not parse: {exc}") from None
        self.lines = self.text.splitlines(True)
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += "\n"
            self.text = "".join(self.lines)

    def _commit(self, lines):
        self.text = "".join(lines)
        self._parse()

    def construct(self, node):
        return yaml.SafeLoader("").construct_document(node)

    def node(self, path):
        node = self.root
        for part in path:
            if isinstance(part, int):
                if not isinstance(node, yaml.SequenceNode):
                    raise CannotEdit("expected a sequence")
                node = node.value[part]
            else:
                node = self.map_value(node, part)
                if node is None:
                    raise CannotEdit(f"missing key {part}")
        return node

    @staticmethod
    def map_value(node, key):
        if not isinstance(node, yaml.MappingNode):
            raise CannotEdit("expected a mapping")
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value_node
        return None

    @staticmethod
    def _map_key_node(node, key):
        for key_node, _value_node in node.value:
            if key_node.value == key:
                return key_node
        return None

    def last_line(self, node):
        """Index of the last line that holds content of ``node``."""
        if isinstance(node, yaml.ScalarNode) or node.flow_style or not node.value:
            end = node.end_mark
            if end.column == 0 and end.line > node.start_mark.line:
                return end.line - 1
            return end.line
        last = node.value[-1]
        if isinstance(node, yaml.MappingNode):
            last = last[1]
        return self.last_line(last)

    def _check_block_mapping(self, node):
        if not isinstance(node, yaml.MappingNode) or node.flow_style or not node.value:
            raise CannotEdit("not a non-empty block mapping")

    def _indent_step(self):
        """Indentation step of the document (kubeadm: 2)."""
        for key_node, value_node in getattr(self.root, "value", []):
            if isinstance(value_node, yaml.MappingNode) and value_node.value and not value_node.flow_style:
                step = value_node.value[0][0].start_mark.column - key_node.start_mark.column
                if step > 0:
                    return step
        return 2

    def _seq_dash_offset(self):
        """0 when block sequences start at their key's column (kubeadm style), else the offset used."""
        for node in self._walk(self.root):
            if isinstance(node, yaml.MappingNode) and not node.flow_style:
                for key_node, value_node in node.value:
                    if isinstance(value_node, yaml.SequenceNode) and value_node.value and not value_node.flow_style:
                        first = value_node.value[0]
                        dash = self._dash_column(first)
                        return max(dash - key_node.start_mark.column, 0)
        return 0

    def _walk(self, node):
        yield node
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                yield from self._walk(k)
                yield from self._walk(v)
        elif isinstance(node, yaml.SequenceNode):
            for v in node.value:
                yield from self._walk(v)

    def _dash_column(self, item):
        line = self.lines[item.start_mark.line]
        dash = line.rfind("-", 0, item.start_mark.column)
        if dash < 0 or line[:dash].strip():
            raise CannotEdit("sequence item does not start its line")
        return dash

    def render_value_lines(self, key, value, column, step, dash_offset):
        """Lines for ``key: value`` at ``column`` (value may be a scalar, list or dict)."""
        pad = " " * column
        if isinstance(value, dict):
            if not value:
                return [pad + key + ": {}\n"]
            lines = [pad + key + ":\n"]
            for k, v in value.items():
                lines += self.render_value_lines(k, v, column + step, step, dash_offset)
            return lines
        if isinstance(value, list):
            if not value:
                return [pad + key + ": []\n"]
            lines = [pad + key + ":\n"]
            for item in value:
                lines += self.render_item_lines(item, column + dash_offset, column + dash_offset + 2, step, dash_offset)
            return lines
        return [pad + key + ": " + scalar(value) + "\n"]

    def render_item_lines(self, item, dash_col, content_col, step, dash_offset):
        prefix = " " * dash_col + "-" + " " * (content_col - dash_col - 1)
        if isinstance(item, dict) and item:
            lines = []
            for k, v in item.items():
                lines += self.render_value_lines(k, v, content_col, step, dash_offset)
            lines[0] = prefix + lines[0][content_col:]
            return lines
        if isinstance(item, (dict, list)):
            raise CannotEdit("cannot render nested empty collections in a sequence")
        return [prefix + scalar(item) + "\n"]

    def insert_seq_item(self, seq_node, index, item):
        first = seq_node.value[0]
        dash = self._dash_column(first)
        content = first.start_mark.column
        if content <= dash:
            raise CannotEdit("odd sequence layout")
        new_lines = self.render_item_lines(item, dash, content, self._indent_step(), self._seq_dash_offset())
        if index < len(seq_node.value):
            at = seq_node.value[index].start_mark.line
            self._dash_column(seq_node.value[index])
        else:
            at = self.last_line(seq_node) + 1
        lines = list(self.lines)
        lines[at:at] = new_lines
        self._commit(lines)

    def remove_seq_item(self, seq_node, index):
        item = seq_node.value[index]
        self._dash_column(item)
        start = item.start_mark.line
        end = self.last_line(item)
        if index + 1 < len(seq_node.value) and seq_node.value[index + 1].start_mark.line <= end:
            raise CannotEdit("items share a line")
        lines = list(self.lines)
        del lines[start : end + 1]
        self._commit(lines)

    def insert_key(self, map_node, key, value):
        self._check_block_mapping(map_node)
        keys = [k for k, _v in map_node.value]
        column = keys[0].start_mark.column
        for key_node in keys:
            if key_node.start_mark.column != column:
                raise CannotEdit("keys of a mapping at different columns")
        # the first key of a mapping that is a sequence item shares the dash line
        first_line = self.lines[keys[0].start_mark.line]
        first_in_item = bool(first_line[:column].strip())
        names = [k.value for k in keys]
        at = None
        if names == sorted(names):
            for pos, key_node in enumerate(keys):
                if key_node.value > key:
                    if pos == 0 and first_in_item:
                        break  # cannot go before the dash; append instead
                    at = key_node.start_mark.line
                    break
        if at is None:
            at = self.last_line(map_node) + 1
        new_lines = self.render_value_lines(key, value, column, self._indent_step(), self._seq_dash_offset())
        lines = list(self.lines)
        lines[at:at] = new_lines
        self._commit(lines)

    def remove_key(self, map_node, key):
        self._check_block_mapping(map_node)
        for pos, (key_node, value_node) in enumerate(map_node.value):
            if key_node.value != key:
                continue
            line = self.lines[key_node.start_mark.line]
            if line[: key_node.start_mark.column].strip():
                raise CannotEdit(f"key {key} shares its line (first key of a sequence item?)")
            start = key_node.start_mark.line
            end = self.last_line(value_node)
            if pos + 1 < len(map_node.value) and map_node.value[pos + 1][0].start_mark.line <= end:
                raise CannotEdit("keys share a line")
            lines = list(self.lines)
            del lines[start : end + 1]
            self._commit(lines)
            return
        raise CannotEdit(f"key {key} not found")

    def replace_scalar(self, node, value):
        start, end = node.start_mark, node.end_mark
        if start.line != end.line:
            raise CannotEdit("multi-line scalar")
        lines = list(self.lines)
        line = lines[start.line]
        lines[start.line] = line[: start.column] + scalar(value) + line[end.column :]
        self._commit(lines)


def comment_lines(text):
    """1-based numbers of the lines of ``text`` that hold a YAML comment (what a re-emission drops).

    A ``#`` starts a comment at the start of a line or after white space, outside a scalar (YAML
    1.1 section 4.3.2); PyYAML's scanner gives the scalars' spans, so a ``#`` inside a quoted or
    plain value (``url: http://h/#x``, ``'a #b'``) is not taken for one."""
    spans = []
    try:
        for token in yaml.scan(text):
            if isinstance(token, yaml.ScalarToken):
                spans.append((token.start_mark.index, token.end_mark.index))
    except yaml.YAMLError:
        return []
    found = []
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        for column, char in enumerate(line):
            if char != "#" or (column and not line[column - 1].isspace()):
                continue
            index = offset + column
            if not any(start <= index < end for start, end in spans):
                found.append(number)
                break
        offset += len(line)
    return found


def dump(doc, like=""):
    """The fallback emitter: JSON when the original text was JSON, else block YAML (keys in order)."""
    if like.lstrip().startswith("{"):
        return json.dumps(doc, indent=2) + "\n"
    return yaml.safe_dump(doc, default_flow_style=False, sort_keys=False, width=4096)


def line_ending(text):
    """``'\r\n'`` when every line of ``text`` ends in CRLF (a file written on Windows), else ``'\n'``."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf == text.count("\n") else "\n"


def apply_ops_to_doc(doc, ops):
    """A deep copy of ``doc`` with ``ops`` applied (no text: what a document becomes, for comparisons)."""
    new = copy.deepcopy(doc)
    for op in ops:
        op.apply_doc(new)
    return new


def apply_ops(text, doc, ops):
    """Apply ``ops`` to ``doc`` (a deep copy) and to ``text``.

    Returns ``(new_text, new_doc, reemitted)``; ``reemitted`` is True when the text could not
    be edited surgically and ``new_text`` is ``dump(new_doc)`` instead.

    A CRLF file is edited as LF and turned back into CRLF, so the inserted lines get the file's
    own line ending and the untouched lines keep their bytes (no mixed endings).
    """
    if ops and line_ending(text) == "\r\n":
        new_text, new_doc, reemitted = _apply_ops(text.replace("\r\n", "\n"), doc, ops)
        return new_text.replace("\r\n", "\n").replace("\n", "\r\n"), new_doc, reemitted
    return _apply_ops(text, doc, ops)


def _apply_ops(text, doc, ops):
    new_doc = copy.deepcopy(doc)
    for op in ops:
        op.apply_doc(new_doc)
    if not ops:
        return text, new_doc, False
    try:
        editor = Editor(text)
        for op in ops:
            op.apply_text(editor)
        if yaml.safe_load(editor.text) == new_doc:
            return editor.text, new_doc, False
    except (CannotEdit, yaml.YAMLError, IndexError, KeyError, TypeError):
        pass
    return dump(new_doc, text), new_doc, True
