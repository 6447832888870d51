"""Adapters that act on OpenSM and Slurm: read live state, apply a change, verify, roll back.

Applying a proposal: `ibpool apply` (`scheduler_hooks.apply`; docs/apply.md)
    `ibpool apply ID [--yes] [--config FILE] [--db PATH] [--by NAME] [--recover] [--json]`. Without
    `--yes` it is a dry run: per target the proposal's before and after, the live value, which side
    (opensm, slurm) and what would run; nothing changes (no transition, no file, no step record).

    Config (`--config`, else $IBPOOL_APPLY_CONFIG, else /etc/ibpool/apply.yaml); every problem is reported
    at once as `FILE: key: message`, exit 2::

        state_dir: /var/lib/ibpool/apply            # the apply lock; opensm.state_dir defaults below it
        approval_config: /etc/ibpool/approval.yaml  # optional: blast-radius limits (else built-in)
        opensm:                                     # OpenSMConfig (scheduler_hooks.opensm.config)
          config_file: /etc/opensm/opensm.conf
          qos_policy_file: /etc/opensm/qos-policy.conf
          partitions_file: /etc/opensm/partitions.conf
          pid_file: /run/opensm.pid
        slurm:                                      # SlurmConfig (scheduler_hooks.slurm.config)
          slurm_conf: /etc/slurm/slurm.conf
          persist: true                             # keep slurm.conf in step (survives scontrol reconfigure)

    Flow with `--yes` (one apply at a time per state_dir): finish interrupted applies first; the proposal
    must be `approved` (an expired one is marked `expired`); the live state is read again: a target that
    shows neither `before` nor `after` is stale and the apply is refused, the refusal in the audit log;
    when every target already shows `after` the proposal goes `applying -> applied` untouched; then the
    blast-radius limits and both adapters' validation (every problem listed, nothing touched); then
    `applying`, each side in the order of its first listed change (OpenSM: write, SIGHUP, verify on the
    fabric; Slurm: drain, wait, set full lists, resume, read back, persist), every adapter step recorded
    with `Store.record_step` as `<side>.<step>` beside the orchestrator's `apply.*` steps; `applied`. On a
    failure: `failed`, every side that changed is rolled back (the other side of a two-sided move too),
    then `rolled_back`; when a rollback fails the proposal stays `failed` and the audit log says why.
    Applying an `applied` proposal again changes nothing.

    Recovery (`--recover`, and at the start of every apply): a proposal left `applying` (or `failed` with
    an unfinished rollback) is resumed from its step records: an interrupted side is finished or undone by
    its adapter's `recover` (OpenSM: files all written -> signal and verify, else restore; Slurm: forward
    once the partitions were set, else back); a side that never began is not started; then `applied`, or
    `failed` and the rollback of what changed. Exit codes: 0 done, 1 refused (nothing changed), 2 usage or
    config, 3 failed and rolled back, 4 failed and not rolled back (an operator looks at
    `ibpool proposals show ID`).

    Metrics: `ibpool_changes_applied_total{target="opensm|slurm",result="applied|failed|rolled_back"}` is
    counted from the audit log (each transition once per system the proposal changes), so a short-lived
    CLI loses nothing; `scheduler_hooks.apply.metrics.changes_applied_family(store)` gives the family for a
    long-running exporter.
"""
