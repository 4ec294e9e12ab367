#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_files
short_description: Several directories and files on a host, and paths to remove, in one module run
version_added: 0.1.0
description:
  - Does for a set of paths what M(ansible.builtin.file) (C(state=directory), C(state=absent)) and
    M(ansible.builtin.copy) (C(content)) do for one path each, in one module run.
  - One module run costs a connection, a sudo and a Python start on the host; a role that installs a
    handful of files on every node (a boot unit, its runner, its configuration) pays that once instead
    of once per path.
  - The whole request is checked before anything is read and every problem is reported at once; then
    each path is compared with what is there. Changes are made in order, directories, files, then
    removals; a file is replaced atomically (a temporary file in its directory, renamed over it).
  - When a step fails, what the run changed before it is put back (newest first) and the module fails
    saying what it could not put back. A removed directory tree is not put back, which is why
    removals come last.
  - A file that is a symbolic link is written through the link (the link stays); a path to remove that
    is a link is removed as a link.
author:
  - poweraware.k8s contributors (@poweraware)
options:
  directories:
    description:
      - Directories that must exist, in order. Missing parents are created with the same mode, owner and
        group.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description:
          - Absolute path without C(.) or C(..); repeated slashes count as one and a trailing slash is dropped.
        type: str
        required: true
      mode:
        description:
          - Numeric mode, as for M(ansible.builtin.file); quote it (V("0755")). An integer is taken as
            YAML gives it (C(0755) unquoted is 493), text as octal, so C(-e) values and YAML agree.
        type: raw
        required: true
      owner:
        description:
          - User name or uid; omitted, a new directory is the remote user's and an existing one keeps its owner.
        type: str
      group:
        description: Group name or gid; omitted, as for O(directories[].owner).
        type: str
  files:
    description:
      - Files with the given text, in order. A missing parent directory is created (mode 0755).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path without C(.) or C(..) or a trailing slash; repeated slashes count as one.
        type: str
        required: true
      content:
        description: The file's text (UTF-8), written as given (a trailing newline is not added).
        type: str
        required: true
      mode:
        description: As O(directories[].mode).
        type: raw
        required: true
      owner:
        description: As O(directories[].owner).
        type: str
      group:
        description: As O(directories[].group).
        type: str
  absent:
    description:
      - Paths that must not exist (a file, a link or a whole directory tree). A top-level directory
        (C(/etc)) is refused.
    type: list
    elements: str
    default: []
  absent_when_empty:
    description:
      - Directories removed only when nothing is left in them once the rest of the request is done (what
        O(absent) removes, and directories of this list named before them). These are the directories a role
        created for its files, which may hold what is not the role's. Name the deepest first. A directory that
        holds anything else stays, as does a path that is not a directory. A top-level directory is refused.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
extends_documentation_fragment:
  - poweraware.k8s.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - One before/after per changed path; a file's text, or its kind, mode, uid and gid when only those
        change. Text over 104448 bytes (M(ansible.builtin.copy)'s limit) or not UTF-8 is not shown.
  idempotent:
    support: full
seealso:
  - module: ansible.builtin.file
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Install a boot unit, its runner and its configuration in one module run
  poweraware.k8s.node_files:
    directories:
      - {path: /usr/local/lib/poweraware, mode: "0755"}
    files:
      - path: /usr/local/lib/poweraware/apply.py
        content: "{{ lookup('ansible.builtin.file', 'apply.py', rstrip=false) }}"
        mode: "0755"
      - path: /etc/systemd/system/poweraware-apply.service
        content: "{{ lookup('ansible.builtin.template', 'poweraware-apply.service.j2') }}"
        mode: "0644"
    absent:
      - /usr/local/lib/poweraware/old-runner
  register: installed

- name: Reload systemd only when the unit changed
  ansible.builtin.systemd_service:
    daemon_reload: true
  when: "'/etc/systemd/system/poweraware-apply.service' in installed.changed_paths"
"""

RETURN = r"""
changed_paths:
  description:
    - The paths this run changed (would change, in check mode), in the order given, repeated slashes
      written as one.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/poweraware/apply.py]
actions:
  description:
    - For each changed path, what changed; C(create), C(content), C(mode), C(owner), C(group) or C(remove).
  returned: always
  type: dict
  sample: {/usr/local/lib/poweraware/apply.py: [content]}
"""

import grp  # noqa: E402
import pwd  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.node_files.file_set import (  # noqa: E402
    Ops,
    apply_file_set,
    check_file_set,
    plan_file_set,
)


def _lookup(by_name):
    def number(text):
        if text.isdigit():
            return int(text)
        try:
            return by_name(text)
        except KeyError:
            return None

    return number


def main():
    entry = dict(
        path=dict(type="str", required=True),
        mode=dict(type="raw", required=True),
        owner=dict(type="str"),
        group=dict(type="str"),
    )
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", default=[], options=entry),
            files=dict(
                type="list", elements="dict", default=[], options=dict(entry, content=dict(type="str", required=True))
            ),
            absent=dict(type="list", elements="str", default=[]),
            absent_when_empty=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    entries, problems = check_file_set(
        p["directories"],
        p["files"],
        p["absent"],
        _lookup(lambda name: pwd.getpwnam(name).pw_uid),
        _lookup(lambda name: grp.getgrnam(name).gr_gid),
        p["absent_when_empty"],
    )
    if problems:
        module.fail_json(msg="Nothing was changed: " + "; ".join(problems), problems=problems)
    ops = Ops(move=module.atomic_move)
    try:
        steps, problems = plan_file_set(entries, ops)
    except OSError as exc:
        module.fail_json(
            msg=f"Nothing was changed: cannot read {exc.filename}: {exc.strerror}; fix: run the task with become"
        )
    if problems:
        module.fail_json(msg="Nothing was changed: " + "; ".join(problems), problems=problems)
    result = dict(
        changed=bool(steps),
        changed_paths=[s["path"] for s in steps],
        actions={s["path"]: s["actions"] for s in steps},
    )
    if module._diff:
        result["diff"] = [dict(s["diff"], before_header=s["path"], after_header=s["path"]) for s in steps]
    if steps and not module.check_mode:
        failure = apply_file_set(steps, ops)
        if failure:
            undone = (
                "what this run changed before it was put back"
                if not failure["problems"]
                else ("putting back what this run changed before it failed too: " + "; ".join(failure["problems"]))
            )
            module.fail_json(
                msg=f"{failure['reason']}; {undone}; fix: the cause (a read-only or full file system, "
                "an immutable file) and run again",
                **result,
            )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
