//! contrib/kubernetes, checked offline: the built-in kinds against the
//! Kubernetes schemas (PyPI's kubernetes-validate, strict), the Prometheus
//! Operator's kinds for what ties them to the rest, the PrometheusRule
//! against the shipped alert rules and promtool (tests/kubernetes/check.py).

mod common;

use std::path::Path;

#[test]
fn the_kubernetes_manifests_validate_and_agree_with_each_other_and_the_alert_rules() {
    let (Some(python), Some(promtool)) = (common::test_python(), common::prometheus::tool("promtool")) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "needs the test Python (scripts/test-env.sh) and promtool"
        );
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(python)
        .arg(root.join("tests/kubernetes/check.py"))
        .arg(root.join("contrib"))
        .arg(promtool)
        .output()
        .unwrap();
    let said = common::said(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("ok: the PrometheusRule's groups are gputaskman-alerts.yml's"),
        "{said}"
    );
    assert!(!said.contains("FAILED"), "{said}");
}
