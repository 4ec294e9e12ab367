"""_yaml_edit directly: exact text of each surgical edit, the sorted insertion points, and when it falls back."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import yaml_edit as ye

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
spec:
  containers:
  - command:
    - kube-scheduler
    - --bind-address=127.0.0.1
    - --kubeconfig=/etc/kubernetes/scheduler.conf
    image: registry.k8s.io/kube-scheduler:v1.29.3
    name: kube-scheduler
  hostNetwork: true
  volumes:
  - hostPath:
      path: /etc/kubernetes/scheduler.conf
      type: FileOrCreate
    name: kubeconfig
"""
CMD = ["spec", "containers", 0]


def edit(text, *ops):
    new_text, new_doc, reemitted = ye.apply_ops(text, yaml.safe_load(text), list(ops))
    assert yaml.safe_load(new_text) == new_doc
    return new_text, reemitted


def surgical(text, *ops):
    new_text, reemitted = edit(text, *ops)
    assert reemitted is False
    return new_text


def lines_of(text):
    return text.splitlines(True)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (8443, "8443"),
        ("kube-scheduler", "kube-scheduler"),
        ("--config=/etc/kubernetes/tas.yaml", "--config=/etc/kubernetes/tas.yaml"),
        ("a:b", "a:b"),
        ("a,b~c@d%e+f", "a,b~c@d%e+f"),
        ("abc:", "'abc:'"),
        ("true", "'true'"),
        ("null", "'null'"),
        ("1.5", "'1.5'"),
        ("12", "'12'"),
        ("", "''"),
        ("a b", "'a b'"),
        (",a", "',a'"),
        ("~", "'~'"),
        ("it's", "'it''s'"),
        ("{x}", "'{x}'"),
        (1.5, "'1.5'"),
    ],
)
def test_scalar_renders_plain_only_what_reads_back_as_the_same_string(value, text):
    assert ye.scalar(value) == text


@pytest.mark.parametrize(
    ("seq", "item", "sorted_from", "index"),
    [
        (["kube-scheduler", "--b", "--d"], "--c", 1, 2),
        (["kube-scheduler", "--b", "--d"], "--a", 1, 1),
        (["kube-scheduler", "--b", "--d"], "--e", 1, 3),
        (["kube-scheduler", "--b", "--d"], "--b", 1, 2),
        (["kube-scheduler", "--b", "--d"], "--c", None, 3),
        (["kube-scheduler", "--d", "--b"], "--c", 1, 3),
        (["z", "--b", "--d"], "--c", 1, 2),
        (["z", "--b", "--d"], "--c", 0, 3),
        (["a", "b", "d"], "c", 0, 2),
        (["a", "b", "d"], "c", 2, 2),
        (["d", "a", "e"], "c", 1, 2),
        (["d", "a", "e"], "c", 0, 3),
        (["kube-scheduler", 1, "--d"], "--c", 1, 3),
        (["kube-scheduler", "--b", "--d"], 5, 1, 3),
    ],
)
def test_seq_append_index_goes_before_the_first_larger_item_of_a_sorted_tail(seq, item, sorted_from, index):
    assert ye.SeqAppend([], "k", item, sorted_from=sorted_from)._index(seq) == index
    doc = {"k": list(seq)}
    ye.SeqAppend([], "k", item, sorted_from=sorted_from).apply_doc(doc)
    assert doc["k"] == seq[:index] + [item] + seq[index:]


def test_seq_append_creates_a_missing_key_with_a_copy_of_the_item():
    item = {"name": "x"}
    doc = {"spec": {}}
    ye.SeqAppend(["spec"], "volumes", item).apply_doc(doc)
    assert doc == {"spec": {"volumes": [{"name": "x"}]}}
    item["name"] = "changed"
    ye.SeqAppend(["spec"], "volumes", item).apply_doc(doc)
    assert doc == {"spec": {"volumes": [{"name": "x"}, {"name": "changed"}]}}
    doc["spec"]["volumes"][1]["name"] = "y"
    assert item == {"name": "changed"}


def test_a_flag_goes_to_its_sorted_place_in_the_command():
    text = surgical(POD, ye.SeqAppend(CMD, "command", "--config=/etc/kubernetes/tas.yaml", sorted_from=1))
    expected = lines_of(POD)
    expected.insert(10, "    - --config=/etc/kubernetes/tas.yaml\n")
    assert text == "".join(expected)


def test_a_flag_after_every_other_is_appended_after_the_last_item():
    text = surgical(POD, ye.SeqAppend(CMD, "command", "--v=4", sorted_from=1))
    expected = lines_of(POD)
    expected.insert(11, "    - --v=4\n")
    assert text == "".join(expected)


def test_a_mapping_item_is_appended_in_the_layout_of_the_file():
    volume = {"hostPath": {"path": "/etc/kubernetes/tas", "type": "DirectoryOrCreate"}, "name": "tas"}
    mount = {"mountPath": "/etc/kubernetes/tas", "name": "tas", "readOnly": True}
    text = surgical(POD, ye.SeqAppend(["spec"], "volumes", volume), ye.SeqAppend(CMD, "volumeMounts", mount))
    assert text == (
        POD.replace(
            "    name: kube-scheduler\n",
            "    name: kube-scheduler\n"
            "    volumeMounts:\n"
            "    - mountPath: /etc/kubernetes/tas\n"
            "      name: tas\n"
            "      readOnly: true\n",
        )
        + "  - hostPath:\n"
        "      path: /etc/kubernetes/tas\n"
        "      type: DirectoryOrCreate\n"
        "    name: tas\n"
    )


INDENTED = """\
spec:
    containers:
        -   args:
                - one
            name: c
    volumes:
        -   name: a
"""


def test_indented_sequences_and_a_wider_step_are_followed():
    text = surgical(
        INDENTED,
        ye.SeqAppend(["spec", "containers", 0], "args", "two"),
        ye.KeySet(["spec"], "extra", {"list": ["x"], "map": {"k": "v"}, "empty": [], "none": {}}),
        ye.SeqAppend(["spec"], "volumes", {"name": "b", "items": ["p"]}),
    )
    assert text == (
        "spec:\n"
        "    containers:\n"
        "        -   args:\n"
        "                - one\n"
        "                - two\n"
        "            name: c\n"
        "    extra:\n"
        "        list:\n"
        "            - x\n"
        "        map:\n"
        "            k: v\n"
        "        empty: []\n"
        "        none: {}\n"
        "    volumes:\n"
        "        -   name: a\n"
        "        -   name: b\n"
        "            items:\n"
        "                - p\n"
    )


def test_key_set_inserts_a_key_at_its_sorted_place_and_replaces_a_scalar_in_place():
    text = surgical(
        POD,
        ye.KeySet(["spec"], "dnsPolicy", "ClusterFirstWithHostNet"),
        ye.KeySet(["spec"], "hostNetwork", False),
        ye.KeySet(["metadata"], "annotations", {"poweraware.k8s/record": "a b"}),
    )
    assert text == POD.replace(
        "  hostNetwork: true\n", "  dnsPolicy: ClusterFirstWithHostNet\n  hostNetwork: false\n"
    ).replace("metadata:\n", "metadata:\n  annotations:\n    poweraware.k8s/record: 'a b'\n")


def test_key_set_after_the_last_key_and_in_unsorted_mappings_appends():
    text = surgical(POD, ye.KeySet(["metadata"], "zz", "1"), ye.KeySet([], "zzz", 1), ye.KeySet([], "aaa", 1))
    assert (
        text
        == "aaa: 1\n" + POD.replace("  namespace: kube-system\n", "  namespace: kube-system\n  zz: '1'\n") + "zzz: 1\n"
    )
    unsorted = "b: 1\na: 2\n"
    assert surgical(unsorted, ye.KeySet([], "a0", 3)) == "b: 1\na: 2\na0: 3\n"


def test_key_set_does_not_go_before_the_dash_of_a_sequence_item():
    text = surgical(POD, ye.KeySet(CMD, "args", ["x"]))
    assert text == POD.replace("    name: kube-scheduler\n", "    name: kube-scheduler\n    args:\n    - x\n")


def test_key_set_replaces_a_collection_by_removing_and_inserting_the_key():
    text = surgical(POD, ye.KeySet(["metadata"], "name", {"a": 1}), ye.KeySet(["spec"], "volumes", "none"))
    assert text == POD.replace("  name: kube-scheduler\n  namespace", "  name:\n    a: 1\n  namespace").replace(
        "  volumes:\n  - hostPath:\n      path: /etc/kubernetes/scheduler.conf\n      type: FileOrCreate\n"
        "    name: kubeconfig\n",
        "  volumes: none\n",
    )


def test_key_set_on_a_missing_mapping_falls_back():
    doc = {"spec": None}
    with pytest.raises(ye.CannotEdit, match="^missing mapping$"):
        ye.KeySet(["spec"], "x", 1).apply_doc(doc)


def test_key_remove_removes_the_key_and_its_lines_and_the_parent_only_when_asked():
    text = surgical(POD, ye.KeyRemove(["metadata"], "namespace"))
    assert text == POD.replace("  namespace: kube-system\n", "")
    # the first key of a sequence item shares the dash line: not removed surgically
    assert edit(POD, ye.KeyRemove(["spec", "volumes", 0], "hostPath"))[1] is True
    one = "a:\n  b:\n    c: 1\n  d: 2\n"
    assert surgical(one, ye.KeyRemove(["a", "b"], "c", drop_parent_if_empty=True)) == "a:\n  d: 2\n"
    assert edit(one, ye.KeyRemove(["a", "b"], "c")) == ("a:\n  b: {}\n  d: 2\n", True)
    assert surgical(one, ye.KeyRemove(["a"], "d", drop_parent_if_empty=True)) == "a:\n  b:\n    c: 1\n"
    assert surgical(one, ye.KeyRemove(["a"], "zz", drop_parent_if_empty=True)) == one
    assert surgical(one, ye.KeyRemove(["a", "b", "c"], "x")) == one
    assert surgical("c: 1\nd: 2\n", ye.KeyRemove([], "c", drop_parent_if_empty=True)) == "d: 2\n"


def test_key_remove_on_the_document():
    doc = {"a": {"b": {"c": 1}, "d": 2}}
    ye.KeyRemove(["a", "b"], "c", drop_parent_if_empty=True).apply_doc(doc)
    assert doc == {"a": {"d": 2}}
    doc = {"a": {"b": {"c": 1}}}
    ye.KeyRemove(["a", "b"], "c").apply_doc(doc)
    assert doc == {"a": {"b": {}}}
    doc = {"c": 1}
    ye.KeyRemove([], "c", drop_parent_if_empty=True).apply_doc(doc)
    assert doc == {}
    doc = {"a": [1]}
    ye.KeyRemove(["a"], "c").apply_doc(doc)
    assert doc == {"a": [1]}
    doc = {"a": {"b": {"c": 1, "e": 2}}}
    ye.KeyRemove(["a", "b"], "c", drop_parent_if_empty=True).apply_doc(doc)
    assert doc == {"a": {"b": {"e": 2}}}


def test_seq_remove_removes_every_matching_item():
    text = surgical(POD, ye.SeqRemove(CMD, "command", lambda flag: flag.startswith("--")))
    assert text == POD.replace(
        "    - --bind-address=127.0.0.1\n    - --kubeconfig=/etc/kubernetes/scheduler.conf\n", ""
    )
    text = surgical(POD, ye.SeqRemove(["spec"], "volumes", lambda v: v["name"] == "kubeconfig", drop_key_if_empty=True))
    assert text == POD.split("  volumes:\n", maxsplit=1)[0]
    assert surgical(POD, ye.SeqRemove(["spec"], "hostNetwork", lambda v: True)) == POD
    assert surgical(POD, ye.SeqRemove(["spec"], "missing", lambda v: True)) == POD
    assert surgical(POD, ye.SeqRemove(CMD, "command", lambda v: False)) == POD


def test_seq_remove_of_the_last_item_falls_back_unless_the_key_may_go():
    new_text, new_doc, reemitted = ye.apply_ops(
        POD, yaml.safe_load(POD), [ye.SeqRemove(["spec"], "volumes", lambda v: True)]
    )
    assert reemitted is True
    assert new_doc["spec"]["volumes"] == []
    assert new_text == yaml.safe_dump(new_doc, default_flow_style=False, sort_keys=False, width=4096)


def test_seq_remove_on_the_document():
    doc = {"a": [1, 2, 3], "b": "x"}
    ye.SeqRemove([], "a", lambda v: v != 2).apply_doc(doc)
    assert doc == {"a": [2], "b": "x"}
    ye.SeqRemove([], "a", lambda v: True).apply_doc(doc)
    assert doc == {"a": [], "b": "x"}
    ye.SeqRemove([], "a", lambda v: True, drop_key_if_empty=True).apply_doc(doc)
    assert doc == {"b": "x"}
    ye.SeqRemove([], "b", lambda v: True, drop_key_if_empty=True).apply_doc(doc)
    assert doc == {"b": "x"}
    doc = {"a": [1, 2]}
    ye.SeqRemove([], "a", lambda v: v == 1, drop_key_if_empty=True).apply_doc(doc)
    assert doc == {"a": [2]}


@pytest.mark.parametrize("empty", ["", " null", " ~"])
def test_seq_append_to_an_empty_key_replaces_it_with_a_list(empty):
    text = f"a: 1\nk:{empty}\nz: 2\n"
    assert surgical(text, ye.SeqAppend([], "k", "x")) == "a: 1\nk:\n- x\nz: 2\n"


def test_seq_append_to_a_flow_sequence_falls_back_to_a_dump():
    text = "a: [x, y]\nb: 1\n"
    new_text, reemitted = edit(text, ye.SeqAppend([], "a", "z"))
    assert reemitted is True
    assert new_text == "a:\n- x\n- y\n- z\nb: 1\n"


def test_a_json_manifest_falls_back_to_json():
    text = '{"a": [1], "b": {"c": "d"}}'
    new_text, reemitted = edit(text, ye.KeySet(["b"], "e", "f"))
    assert reemitted is True
    assert new_text == '{\n  "a": [\n    1\n  ],\n  "b": {\n    "c": "d",\n    "e": "f"\n  }\n}\n'
    new_text, reemitted = edit("  " + text, ye.KeySet(["b"], "e", "f"))
    assert new_text.startswith('{\n  "a"')


def test_no_ops_give_the_text_back_unchanged():
    text = "a: 1\r\nb: [1]"
    doc = yaml.safe_load(text)
    new_text, new_doc, reemitted = ye.apply_ops(text, doc, [])
    assert (new_text, new_doc, reemitted) == (text, doc, False)
    assert new_doc is not doc


def test_a_last_line_without_newline_gets_one():
    assert surgical("a: 1", ye.KeySet([], "b", 2)) == "a: 1\nb: 2\n"
    assert surgical("b: 1", ye.KeySet([], "a", 2)) == "a: 2\nb: 1\n"


def test_crlf_files_stay_crlf():
    text = POD.replace("\n", "\r\n")
    new_text = surgical(text, ye.KeySet(["spec"], "dnsPolicy", "Default"))
    assert new_text == POD.replace("  hostNetwork", "  dnsPolicy: Default\n  hostNetwork").replace("\n", "\r\n")


@pytest.mark.parametrize(
    ("text", "ending"),
    [("a\r\nb\r\n", "\r\n"), ("a\r\nb\n", "\n"), ("a\nb\n", "\n"), ("", "\n"), ("a", "\n"), ("a\r\n", "\r\n")],
)
def test_line_ending(text, ending):
    assert ye.line_ending(text) == ending


def test_dump_keeps_key_order_and_long_lines():
    doc = {"z": "x" * 200, "a": {"b": [1]}}
    assert ye.dump(doc) == "z: " + "x" * 200 + "\na:\n  b:\n  - 1\n"
    assert ye.dump(doc, like="\n {") == json_dump(doc)


def json_dump(doc):
    import json

    return json.dumps(doc, indent=2) + "\n"


def test_the_editor_refuses_what_it_cannot_edit_with_a_reason():
    with pytest.raises(ye.CannotEdit, match="^intermediate text does not parse: "):
        ye.Editor("a: [\n")
    editor = ye.Editor("a:\n- x\nb: 1\nc: {d: 1}\n")
    with pytest.raises(ye.CannotEdit, match="^expected a sequence$"):
        editor.node(["b", 0])
    with pytest.raises(ye.CannotEdit, match="^missing key zz$"):
        editor.node(["zz"])
    with pytest.raises(ye.CannotEdit, match="^expected a mapping$"):
        editor.node(["a", "x"])
    with pytest.raises(ye.CannotEdit, match="^not a non-empty block mapping$"):
        editor.insert_key(editor.node(["c"]), "e", 1)
    with pytest.raises(ye.CannotEdit, match="^key zz not found$"):
        editor.remove_key(editor.root, "zz")
    with pytest.raises(ye.CannotEdit, match="^cannot render nested empty collections in a sequence$"):
        editor.render_item_lines({}, 0, 2, 2, 0)
    assert editor.node(["a", 0]).value == "x"
    assert editor.node([]) is editor.root


def test_the_editor_refuses_shared_lines():
    editor = ye.Editor("l:\n- a: 1\n  b: 2\n")
    with pytest.raises(ye.CannotEdit, match="^key a shares its line"):
        editor.remove_key(editor.node(["l", 0]), "a")
    editor = ye.Editor("k: |\n  x\n  y\n")
    with pytest.raises(ye.CannotEdit, match="^multi-line scalar$"):
        editor.replace_scalar(editor.node(["k"]), "z")
    editor = ye.Editor("k: [a, b]\n")
    with pytest.raises(ye.CannotEdit, match="^sequence item does not start its line$"):
        editor.remove_seq_item(editor.node(["k"]), 1)
    editor = ye.Editor("m:\n  a: 1\n  b: 2\n")
    editor.replace_scalar(editor.node(["m", "a"]), "it's")
    assert editor.text == "m:\n  a: 'it''s'\n  b: 2\n"


def test_a_multi_line_item_is_removed_whole():
    text = "l:\n- a: 1\n  b:\n  - x\n  - y\n- a: 2\nz: 1\n"
    assert surgical(text, ye.SeqRemove([], "l", lambda v: v["a"] == 1)) == "l:\n- a: 2\nz: 1\n"
    assert surgical(text, ye.SeqRemove([], "l", lambda v: v["a"] == 2)) == "l:\n- a: 1\n  b:\n  - x\n  - y\nz: 1\n"
    assert surgical(text, ye.SeqAppend([], "l", {"a": 3})) == "l:\n- a: 1\n  b:\n  - x\n  - y\n- a: 2\n- a: 3\nz: 1\n"


def test_last_line_of_nodes():
    editor = ye.Editor("a: x\nb:\n  c: |\n    one\n    two\n  d: 1\ne: [1,\n  2]\nf: 'q'\n")
    assert editor.last_line(editor.node(["a"])) == 0
    assert editor.last_line(editor.node(["b", "c"])) == 4
    assert editor.last_line(editor.node(["b"])) == 5
    assert editor.last_line(editor.node(["e"])) == 7
    assert editor.last_line(editor.root) == 8


def test_the_document_ops_copy_nested_values():
    volume = {"hostPath": {"path": "/a"}, "name": "v"}
    doc = {"spec": {}}
    ye.SeqAppend(["spec"], "volumes", volume).apply_doc(doc)
    ye.SeqAppend(["spec"], "volumes", volume).apply_doc(doc)
    ye.KeySet(["spec"], "one", volume).apply_doc(doc)
    volume["hostPath"]["path"] = "/changed"
    unchanged = {"hostPath": {"path": "/a"}, "name": "v"}
    assert doc == {"spec": {"volumes": [unchanged, unchanged], "one": unchanged}}


def test_seq_ops_on_the_text_refuse_what_is_no_block_sequence_with_the_key_named():
    for text in ("k: [a, b]\n", "k:\n  a: 1\n", "k: x\n"):
        with pytest.raises(ye.CannotEdit, match="^k is not a non-empty block sequence$"):
            ye.SeqAppend([], "k", "c").apply_text(ye.Editor(text))
    with pytest.raises(ye.CannotEdit, match="^removing the last item of k would leave an empty key$"):
        ye.SeqRemove([], "k", lambda v: True).apply_text(ye.Editor("k:\n- a\nz: 1\n"))
    with pytest.raises(ye.CannotEdit, match="^k is a flow sequence$"):
        ye.SeqRemove([], "k", lambda v: v == "a").apply_text(ye.Editor("k: [a, b]\n"))
    editor = ye.Editor("k:\n- a\nz: 1\n")
    ye.SeqRemove([], "k", lambda v: True, drop_key_if_empty=True).apply_text(editor)
    assert editor.text == "z: 1\n"


def test_key_remove_drops_the_parent_at_any_depth():
    text = "x:\n  a:\n    b:\n      c: 1\n    d: 2\n  e: 3\n"
    op = ye.KeyRemove(["x", "a", "b"], "c", drop_parent_if_empty=True)
    assert surgical(text, op) == "x:\n  a:\n    d: 2\n  e: 3\n"
    doc = yaml.safe_load(text)
    op.apply_doc(doc)
    assert doc == {"x": {"a": {"d": 2}, "e": 3}}


def test_a_text_without_final_newline_gets_one_even_when_nothing_changes():
    assert surgical("a: 1\nb: 2", ye.KeyRemove([], "zz")) == "a: 1\nb: 2\n"


def test_the_last_line_of_a_flow_collection_is_its_closing_bracket():
    editor = ye.Editor("e: [1,\n  2\n  ]\nf: {a: 1\n  }\ng: 1\n")
    assert editor.last_line(editor.node(["e"])) == 2
    assert editor.last_line(editor.node(["f"])) == 4
    assert surgical("e: [1,\n  2\n  ]\nf: 1\n", ye.KeyRemove([], "e")) == "f: 1\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" a:\n  b: 1\n", " a:\n  b: 1\n  c:\n   d: 1\n"),
        ("a: 1\nb:\n- x\n", "a: 1\nb:\n- x\nc:\n  d: 1\n"),
        ("a: 1\nb:\n    - x\n", "a: 1\nb:\n    - x\nc:\n  d: 1\n"),
    ],
)
def test_the_indentation_step_is_the_document_s_or_two(text, expected):
    op = ye.KeySet(["a"] if text.startswith(" ") else [], "c", {"d": 1})
    assert surgical(text, op) == expected


def test_nested_values_of_a_new_list_item_use_the_file_s_layout():
    text = surgical(POD, ye.KeySet(["spec"], "x", [{"a": {"b": 1}, "c": ["d"]}]))
    assert text == POD + "  x:\n  - a:\n      b: 1\n    c:\n    - d\n"


def test_an_item_of_a_sequence_sharing_its_parent_s_line_is_not_removed():
    editor = ye.Editor("k:\n- - a\n  - b\n")
    inner = editor.node(["k", 0])
    with pytest.raises(ye.CannotEdit, match="^sequence item does not start its line$"):
        editor.remove_seq_item(inner, 0)
    assert editor.text == "k:\n- - a\n  - b\n"


def test_apply_ops_leaves_the_caller_s_document_alone():
    doc = yaml.safe_load(POD)
    before = yaml.safe_load(POD)
    new_text, new_doc, reemitted = ye.apply_ops(POD, doc, [ye.KeySet(["spec"], "dnsPolicy", "Default")])
    assert doc == before
    assert new_doc["spec"]["dnsPolicy"] == "Default"
    assert reemitted is False
    assert new_text != POD


def test_the_fallback_dump_does_not_wrap_long_lines():
    long = " ".join(["word"] * 300)
    assert ye.dump({"a": long}) == "a: " + long + "\n"


def test_comment_lines_are_the_ones_a_reemission_drops():
    from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.yaml_edit import comment_lines

    text = (
        "# head\n"  # 1: a comment
        "a: 'x #y'\n"  # a quoted value
        "b: http://h/#frag\n"  # a plain value: '#' not after white space
        "c: v # tail\n"  # 4: a comment after a value
        'd: "#x"\n'
        "e: |\n  # in a literal block\n"  # a block scalar's text
        "f: [1, 2]  # flow\n"  # 8
    )
    assert comment_lines(text) == [1, 4, 8]
    assert comment_lines("a: [unclosed\n# x\n") == [2]  # the scanner alone: brackets are the parser's
    assert comment_lines("a: 'unterminated\n# x\n") == []  # a scanner error: nothing claimed
