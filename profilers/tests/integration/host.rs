use benchtop_profilers::host_info;

#[test]
fn host_info_describes_this_machine() {
    let h = host_info();
    assert!(!h.hostname.is_empty(), "{h:?}");
    assert!(!h.kernel.is_empty(), "{h:?}");
    assert!(h.cores >= 1, "{h:?}");
    assert!(h.memory_bytes > 0, "{h:?}");
    assert!(h.perf.paranoid.is_some(), "{h:?}");
}
