/*
 * DPDK's fast-path functions are static inline in its headers, so Rust cannot link to
 * them: this file gives each one the workload uses a symbol of its own (bt_*), and does the
 * port set-up whose structures (rte_eth_conf, rte_eth_link) are too large or too
 * bitfield-laden to declare by hand. Compiled by build.rs with pkg-config's flags for
 * libdpdk. Every other DPDK function is declared in Rust (echo/dpdk/ffi.rs).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

int bt_errno(void) { return rte_errno; }

/*
 * A peer that dies takes the memory of the memif rings with it: the EAL's interrupt
 * thread handles the disconnect and unmaps the regions (memif_free_regions) with no lock
 * against the thread polling the queues, which can be inside a burst, reading a ring
 * that is no longer mapped. The bursts below run guarded: a SIGSEGV raised inside one
 * jumps back out of it and the burst returns -1 (the link is lost; what the burst held is
 * left, as the process ends). A SIGSEGV anywhere else goes to the handler that was there
 * before (the Rust runtime's, which reports a stack overflow or restores the default).
 */
static __thread sigjmp_buf *bt_in_burst;
static struct sigaction bt_previous;

static void bt_on_fault(int sig, siginfo_t *info, void *context) {
    sigjmp_buf *jump = bt_in_burst;
    if (jump != NULL) {
        bt_in_burst = NULL;
        siglongjmp(*jump, 1);
    }
    if (bt_previous.sa_flags & SA_SIGINFO) {
        bt_previous.sa_sigaction(sig, info, context);
    } else if (bt_previous.sa_handler != SIG_IGN && bt_previous.sa_handler != SIG_DFL) {
        bt_previous.sa_handler(sig);
    } else {
        /* Returning re-runs the faulting instruction, which now takes the default. */
        signal(sig, SIG_DFL);
    }
}

/* Installs the guard once, before the first burst: 0, or -1 with errno. */
int bt_guard_bursts(void) {
    struct sigaction guard;
    memset(&guard, 0, sizeof guard);
    guard.sa_sigaction = bt_on_fault;
    /* Not deferred: the jump leaves the handler without restoring the signal mask. */
    guard.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&guard.sa_mask);
    return sigaction(SIGSEGV, &guard, &bt_previous);
}

/* A burst function of ethdev: rte_eth_rx_burst or rte_eth_tx_burst. */
typedef uint16_t (*bt_burst_fn)(uint16_t, uint16_t, struct rte_mbuf **, uint16_t);

/* burst on queue 0 of port, guarded: its count, or -1 when it faulted. */
static int bt_guarded(bt_burst_fn burst, uint16_t port, struct rte_mbuf **pkts, uint16_t n) {
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0) != 0)
        return -1;
    bt_in_burst = &jump;
    int count = burst(port, 0, pkts, n);
    bt_in_burst = NULL;
    return count;
}

/* Up to n frames received into pkts, or -1 when the burst faulted (the peer is gone). */
int bt_rx_burst(uint16_t port, struct rte_mbuf **pkts, uint16_t n) {
    return bt_guarded(rte_eth_rx_burst, port, pkts, n);
}

/* How many of pkts were sent, or -1 when the burst faulted (the peer is gone). */
int bt_tx_burst(uint16_t port, struct rte_mbuf **pkts, uint16_t n) {
    return bt_guarded(rte_eth_tx_burst, port, pkts, n);
}

struct rte_mbuf *bt_mbuf_alloc(struct rte_mempool *mp) { return rte_pktmbuf_alloc(mp); }

void bt_mbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }

/* The first segment's data and its length. */
uint8_t *bt_mbuf_data(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, uint8_t *); }

uint16_t bt_mbuf_data_len(const struct rte_mbuf *m) { return rte_pktmbuf_data_len(m); }

uint16_t bt_mbuf_segs(const struct rte_mbuf *m) { return m->nb_segs; }

/* Room for len more bytes at the end of the data, or NULL. */
uint8_t *bt_mbuf_append(struct rte_mbuf *m, uint16_t len) {
    return (uint8_t *)rte_pktmbuf_append(m, len);
}

/*
 * Configures port with one receive and one transmit queue of desc descriptors, receiving
 * into mp, and starts it: 0, or a negative errno from the step that failed (its number in
 * *step: 1 configure, 2 rx queue, 3 tx queue, 4 start).
 */
int bt_port_start(uint16_t port, struct rte_mempool *mp, uint16_t desc, int *step) {
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    int socket = rte_eth_dev_socket_id(port);
    int rc;
    *step = 1;
    if ((rc = rte_eth_dev_configure(port, 1, 1, &conf)) < 0)
        return rc;
    *step = 2;
    if ((rc = rte_eth_rx_queue_setup(port, 0, desc, socket, NULL, mp)) < 0)
        return rc;
    *step = 3;
    if ((rc = rte_eth_tx_queue_setup(port, 0, desc, socket, NULL)) < 0)
        return rc;
    *step = 4;
    return rte_eth_dev_start(port);
}

/* 1 when the port's link is up, 0 when down, a negative errno when it cannot be read. */
int bt_link_up(uint16_t port) {
    struct rte_eth_link link;
    memset(&link, 0, sizeof link);
    int rc = rte_eth_link_get_nowait(port, &link);
    if (rc < 0)
        return rc;
    return link.link_status == RTE_ETH_LINK_UP;
}

/* The port's MAC address into out[0..6]: 0 or a negative errno. */
int bt_mac(uint16_t port, uint8_t *out) {
    struct rte_ether_addr addr;
    int rc = rte_eth_macaddr_get(port, &addr);
    if (rc == 0)
        memcpy(out, addr.addr_bytes, RTE_ETHER_ADDR_LEN);
    return rc;
}
