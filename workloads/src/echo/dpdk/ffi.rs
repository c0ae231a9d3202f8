//! DPDK's C interface, as much of it as the echo uses: the exported functions declared by
//! hand, and the shim's `bt_*` symbols for the static-inline fast path and the port set-up
//! (csrc/dpdk_shim.c). The types are opaque: the workload never reads their fields.

use std::ffi::{c_char, c_int, c_uint};

/// `struct rte_mempool`.
#[repr(C)]
pub(crate) struct Mempool {
    _opaque: [u8; 0],
}

/// `struct rte_mbuf`.
#[repr(C)]
pub(crate) struct Mbuf {
    _opaque: [u8; 0],
}

// DPDK's exported functions (rte_eal.h, rte_errno.h, rte_mbuf.h, rte_ethdev.h).
#[link(name = "rte_eal")]
#[link(name = "rte_mempool")]
#[link(name = "rte_mbuf")]
#[link(name = "rte_ethdev")]
unsafe extern "C" {
    pub(crate) fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    pub(crate) fn rte_strerror(errnum: c_int) -> *const c_char;
    pub(crate) fn rte_thread_register() -> c_int;
    pub(crate) fn rte_pktmbuf_pool_create(
        name: *const c_char,
        n: c_uint,
        cache_size: c_uint,
        priv_size: u16,
        data_room_size: u16,
        socket_id: c_int,
    ) -> *mut Mempool;
    pub(crate) fn rte_eth_dev_get_port_by_name(name: *const c_char, port_id: *mut u16) -> c_int;
    pub(crate) fn rte_eth_dev_stop(port_id: u16) -> c_int;
    pub(crate) fn rte_eth_dev_close(port_id: u16) -> c_int;
}

// The shim (csrc/dpdk_shim.c), linked by build.rs.
unsafe extern "C" {
    pub(crate) fn bt_errno() -> c_int;
    pub(crate) fn bt_guard_bursts() -> c_int;
    pub(crate) fn bt_rx_burst(port: u16, pkts: *mut *mut Mbuf, n: u16) -> c_int;
    pub(crate) fn bt_tx_burst(port: u16, pkts: *mut *mut Mbuf, n: u16) -> c_int;
    pub(crate) fn bt_mbuf_alloc(mp: *mut Mempool) -> *mut Mbuf;
    pub(crate) fn bt_mbuf_free(m: *mut Mbuf);
    pub(crate) fn bt_mbuf_data(m: *mut Mbuf) -> *mut u8;
    pub(crate) fn bt_mbuf_data_len(m: *const Mbuf) -> u16;
    pub(crate) fn bt_mbuf_segs(m: *const Mbuf) -> u16;
    pub(crate) fn bt_mbuf_append(m: *mut Mbuf, len: u16) -> *mut u8;
    pub(crate) fn bt_port_start(port: u16, mp: *mut Mempool, desc: u16, step: *mut c_int) -> c_int;
    pub(crate) fn bt_link_up(port: u16) -> c_int;
    pub(crate) fn bt_mac(port: u16, out: *mut u8) -> c_int;
}

/// DPDK's text for an error number (its own or errno's).
pub(crate) fn strerror(errnum: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated
    // string for any number; it is copied out at once.
    unsafe {
        let text = rte_strerror(errnum.abs());
        if text.is_null() {
            return format!("error {errnum}");
        }
        std::ffi::CStr::from_ptr(text)
            .to_string_lossy()
            .into_owned()
    }
}
