// Virtual device harness: one Verilated design driven entirely from C++, behind a C API that
// Python loads with ctypes. Python hands over whole packets and asks for N cycles at a time;
// nothing crosses into Python per cycle, which is what makes this ~100x faster than cocotb.
//
// Timing model (the same as the cocotb benches): each cycle the harness sets its inputs,
// evaluates with clk low so combinational outputs settle, samples every handshake (a transfer
// happens when valid and ready are both high at the rising edge), then raises clk. Cycle c is
// the c-th rising edge after the design left reset, counted from 0; the parser's `now` counter
// reads c at that edge, so an ingress timestamp equals the accept cycle modulo 2**32.

#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#include "verilated.h"
#include "Vdev.h"

// Verilator keeps a port of up to 64 bits in a scalar and a wider one in VlWide<N> (32-bit
// words, least significant first); the generated glue moves every port through these.
static inline void vdev_put(CData& p, const uint32_t* w) { p = (CData)w[0]; }
static inline void vdev_put(SData& p, const uint32_t* w) { p = (SData)w[0]; }
static inline void vdev_put(IData& p, const uint32_t* w) { p = w[0]; }
static inline void vdev_put(QData& p, const uint32_t* w) { p = w[0] | ((QData)w[1] << 32); }
template <std::size_t N> static inline void vdev_put(VlWide<N>& p, const uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) p[i] = w[i];
}
static inline void vdev_get(const CData& p, uint32_t* w) { w[0] = p; }
static inline void vdev_get(const SData& p, uint32_t* w) { w[0] = p; }
static inline void vdev_get(const IData& p, uint32_t* w) { w[0] = p; }
static inline void vdev_get(const QData& p, uint32_t* w) {
    w[0] = (uint32_t)p;
    w[1] = (uint32_t)(p >> 32);
}
template <std::size_t N> static inline void vdev_get(const VlWide<N>& p, uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) w[i] = p[i];
}

#include "vdev_ports.h"

static const int DATA_BYTES = VDEV_DATA_BITS / 8;
static const int DATA_WORDS = (VDEV_DATA_BITS + 31) / 32 + 1;  // +1: QData reads two words
static const int KEEP_WORDS = (DATA_BYTES + 31) / 32 + 1;
static const int USER_WORDS = (VDEV_USER_BITS + 31) / 32 + 1;

// xorshift64*: a seeded, cheap source for idle and backpressure patterns.
struct Rng {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    void seed(uint64_t v) { s = v * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull; if (!s) s = 1; }
    double next() {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        return (double)((s * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
    }
};

// A packet waiting on an ingress port; its first beat is offered no earlier than cycle `at`
// (0: as soon as the port is free), which is how traffic at a given rate is paced.
struct Frame {
    std::vector<uint8_t> bytes;
    uint64_t at;
};

struct Source {
    std::deque<Frame> queue;                  // packets not yet fully sent; front is in flight
    size_t offset = 0;                        // bytes of the front packet already sent
    bool presenting = false;                  // tvalid is high (held until the beat is taken)
    bool beat_last = false;
    double idle = 0.0;
    Rng rng;
    std::vector<uint64_t> accept_cycles;      // cycle each packet's first beat went in
};

struct Packet {
    std::vector<uint8_t> data;
    uint32_t first_user[USER_WORDS];
    uint32_t last_user[USER_WORDS];
    uint64_t first_cycle, last_cycle, beats;
};

struct AxilOp {
    bool write;
    uint32_t addr, data, strb;
};

struct Device {
    VerilatedContext* context;
    Vdev* top;
    uint64_t cycle = 0;
    Source src[VDEV_PORTS];
    bool sink_ready = true;
    double stall = 0.0;
    Rng sink_rng;
    std::deque<Packet> out;
    Packet current;
    bool in_packet = false;
    uint64_t last_activity = 0;  // last cycle a beat went in or came out
    // AXI4-Lite master: one transaction at a time.
    bool axil_busy = false, axil_done = false, aw_pending = false, w_pending = false,
         ar_pending = false;
    AxilOp op;
    uint32_t axil_rdata = 0, axil_resp = 0;
};

static void present_next(Device* d, int p) {
    Source& s = d->src[p];
    if (s.presenting || s.queue.empty()) return;
    if (s.idle > 0.0 && s.rng.next() < s.idle) return;
    if (s.offset == 0 && d->cycle < s.queue.front().at) return;
    const std::vector<uint8_t>& pkt = s.queue.front().bytes;
    uint32_t data[DATA_WORDS] = {0}, keep[KEEP_WORDS] = {0};
    size_t n = pkt.size() - s.offset;
    if (n > (size_t)DATA_BYTES) n = DATA_BYTES;
    if (n) std::memcpy(data, pkt.data() + s.offset, n);  // little-endian host: byte i is lane i
    for (size_t i = 0; i < n; ++i) keep[i / 32] |= 1u << (i % 32);
    s.beat_last = s.offset + n >= pkt.size();
    vdev_drive_beat(d->top, p, data, keep, s.beat_last);
    vdev_drive_valid(d->top, p, true);
    s.presenting = true;
}

static void set_inputs(Device* d) {
    for (int p = 0; p < VDEV_PORTS; ++p) present_next(d, p);
    d->sink_ready = d->stall <= 0.0 || d->sink_rng.next() >= d->stall;
    d->top->M_AXIS(tready) = d->sink_ready;
#if VDEV_HAS_AXIL
    Vdev* t = d->top;
    t->S_AXIL(awvalid) = d->aw_pending;
    t->S_AXIL(wvalid) = d->w_pending;
    t->S_AXIL(arvalid) = d->ar_pending;
    t->S_AXIL(bready) = d->axil_busy && d->op.write;
    t->S_AXIL(rready) = d->axil_busy && !d->op.write;
#endif
}

static void capture_beat(Device* d) {
    Vdev* t = d->top;
    uint32_t data[DATA_WORDS] = {0}, keep[KEEP_WORDS] = {0};
    vdev_get(t->M_AXIS(tdata), data);
    vdev_get(t->M_AXIS(tkeep), keep);
    Packet& pk = d->current;
    if (!d->in_packet) {
        pk.data.clear();
        pk.first_cycle = d->cycle;
        pk.beats = 0;
        std::memset(pk.first_user, 0, sizeof pk.first_user);
        VDEV_GET_USER(t, pk.first_user);
        d->in_packet = true;
    }
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(data);
    // Keep the bytes whose keep bit is set; a well-formed beat keeps a prefix of its lanes.
    for (int i = 0; i < DATA_BYTES; ++i)
        if (keep[i / 32] >> (i % 32) & 1) pk.data.push_back(bytes[i]);
    pk.beats++;
    if (t->M_AXIS(tlast)) {
        std::memset(pk.last_user, 0, sizeof pk.last_user);
        VDEV_GET_USER(t, pk.last_user);
        pk.last_cycle = d->cycle;
        d->out.push_back(std::move(pk));
        d->current = Packet();
        d->in_packet = false;
    }
}

// One clock cycle: settle, sample the handshakes, rising edge, advance the state machines.
static void step(Device* d) {
    Vdev* t = d->top;
    set_inputs(d);
    t->clk = 0;
    t->eval();
    bool fired[VDEV_PORTS];
    for (int p = 0; p < VDEV_PORTS; ++p) fired[p] = d->src[p].presenting && vdev_ready(t, p);
    bool out_fire = t->M_AXIS(tvalid) && d->sink_ready;
    if (out_fire) capture_beat(d);
#if VDEV_HAS_AXIL
    bool aw_fire = d->aw_pending && t->S_AXIL(awready);
    bool w_fire = d->w_pending && t->S_AXIL(wready);
    bool ar_fire = d->ar_pending && t->S_AXIL(arready);
    bool b_fire = d->axil_busy && d->op.write && t->S_AXIL(bvalid);
    bool r_fire = d->axil_busy && !d->op.write && t->S_AXIL(rvalid);
    uint32_t rdata = t->S_AXIL(rdata), rresp = t->S_AXIL(rresp), bresp = t->S_AXIL(bresp);
#endif
    t->clk = 1;
    t->eval();
    for (int p = 0; p < VDEV_PORTS; ++p) {
        if (!fired[p]) continue;
        Source& s = d->src[p];
        if (s.offset == 0) s.accept_cycles.push_back(d->cycle);
        s.presenting = false;
        if (s.beat_last) {
            s.queue.pop_front();
            s.offset = 0;
        } else {
            s.offset += DATA_BYTES;
        }
        d->last_activity = d->cycle;
        vdev_drive_valid(t, p, false);
    }
    if (out_fire) d->last_activity = d->cycle;
#if VDEV_HAS_AXIL
    if (aw_fire) d->aw_pending = false;
    if (w_fire) d->w_pending = false;
    if (ar_fire) d->ar_pending = false;
    if (b_fire) { d->axil_resp = bresp; d->axil_busy = false; d->axil_done = true; }
    if (r_fire) {
        d->axil_rdata = rdata; d->axil_resp = rresp; d->axil_busy = false; d->axil_done = true;
    }
#endif
    d->cycle++;
}

static bool drained(Device* d) {
    if (d->in_packet || d->axil_busy) return false;
    for (int p = 0; p < VDEV_PORTS; ++p)
        if (!d->src[p].queue.empty()) return false;
    return true;
}

extern "C" {

int vdev_ports(void) { return VDEV_PORTS; }
int vdev_data_bits(void) { return VDEV_DATA_BITS; }
int vdev_user_bits(void) { return VDEV_USER_BITS; }
int vdev_has_axil(void) { return VDEV_HAS_AXIL; }

void vdev_reset(Device* d, int cycles) {
    Vdev* t = d->top;
    for (int p = 0; p < VDEV_PORTS; ++p) {
        Source& s = d->src[p];
        s.queue.clear();
        s.offset = 0;
        s.presenting = false;
        s.accept_cycles.clear();
        vdev_drive_valid(t, p, false);
    }
    d->out.clear();
    d->current = Packet();
    d->in_packet = false;
    d->axil_busy = d->axil_done = d->aw_pending = d->w_pending = d->ar_pending = false;
    t->M_AXIS(tready) = 0;
#if VDEV_HAS_AXIL
    t->S_AXIL(awvalid) = t->S_AXIL(wvalid) = t->S_AXIL(arvalid) = 0;
    t->S_AXIL(bready) = t->S_AXIL(rready) = 0;
#endif
    t->rst = 1;
    for (int i = 0; i < cycles; ++i) {
        t->clk = 0; t->eval();
        t->clk = 1; t->eval();
    }
    t->rst = 0;
    // The designs' shell registers rst (hw/shell.py): the edge after it falls is still a
    // reset edge, with every handshake closed. Cycle 0 is the first edge out of reset.
    t->clk = 0; t->eval();
    t->clk = 1; t->eval();
    d->cycle = 0;
    d->last_activity = 0;
}

Device* vdev_new(void) {
    Device* d = new Device();
    d->context = new VerilatedContext;
    d->top = new Vdev{d->context};
    vdev_reset(d, 4);
    return d;
}

void vdev_free(Device* d) {
    d->top->final();
    delete d->top;
    delete d->context;
    delete d;
}

int vdev_push_at(Device* d, int port, const uint8_t* data, size_t len, uint64_t at) {
    if (port < 0 || port >= VDEV_PORTS) return -1;
    d->src[port].queue.push_back(Frame{std::vector<uint8_t>(data, data + len), at});
    return 0;
}

int vdev_push(Device* d, int port, const uint8_t* data, size_t len) {
    return vdev_push_at(d, port, data, len, 0);
}

size_t vdev_queued(Device* d, int port) { return d->src[port].queue.size(); }
uint64_t vdev_cycle(Device* d) { return d->cycle; }

void vdev_set_idle(Device* d, int port, double prob, uint64_t seed) {
    d->src[port].idle = prob;
    d->src[port].rng.seed(seed);
}

void vdev_set_backpressure(Device* d, double prob, uint64_t seed) {
    d->stall = prob;
    d->sink_rng.seed(seed);
}

void vdev_run(Device* d, uint64_t cycles) {
    for (uint64_t i = 0; i < cycles; ++i) step(d);
}

// Run until every queue is empty, no packet is half out and nothing has moved for `quiet`
// cycles; stop after `max_cycles`. Returns 1 if drained, 0 on the cap.
int vdev_run_until_drained(Device* d, uint64_t quiet, uint64_t max_cycles) {
    uint64_t start = d->cycle;
    // Quiet is counted from the later of the last beat and the start of this call.
    uint64_t since = d->last_activity > start ? d->last_activity : start;
    while (d->cycle - start < max_cycles) {
        if (drained(d)) {
            uint64_t from = d->last_activity > since ? d->last_activity : since;
            if (d->cycle - from >= quiet) return 1;
        }
        step(d);
    }
    return 0;
}

// Ingress accept cycles of `port` from `start` on (the pushed packets in push order).
size_t vdev_accept_count(Device* d, int port) { return d->src[port].accept_cycles.size(); }
void vdev_accept_cycles(Device* d, int port, size_t start, uint64_t* out) {
    const std::vector<uint64_t>& v = d->src[port].accept_cycles;
    for (size_t i = start; i < v.size(); ++i) out[i - start] = v[i];
}

size_t vdev_out_count(Device* d) { return d->out.size(); }

// Size and cycles of the oldest delivered packet; then vdev_out_take copies and drops it.
int vdev_out_front(Device* d, uint64_t* info) {
    if (d->out.empty()) return 0;
    const Packet& pk = d->out.front();
    info[0] = pk.data.size();
    info[1] = pk.first_cycle;
    info[2] = pk.last_cycle;
    info[3] = pk.beats;
    return 1;
}

void vdev_out_take(Device* d, uint8_t* data, uint32_t* first_user, uint32_t* last_user) {
    Packet& pk = d->out.front();
    if (!pk.data.empty()) std::memcpy(data, pk.data.data(), pk.data.size());
    std::memcpy(first_user, pk.first_user, sizeof pk.first_user);
    std::memcpy(last_user, pk.last_user, sizeof pk.last_user);
    d->out.pop_front();
}

size_t vdev_user_words(void) { return USER_WORDS; }

// One AXI4-Lite transaction, cycle by cycle while traffic keeps flowing. Returns 0 when it
// completed (data and response in *rdata, *resp), -1 if it had not within max_cycles.
int vdev_axil(Device* d, int write, uint32_t addr, uint32_t data, uint32_t strb,
              uint64_t max_cycles, uint32_t* rdata, uint32_t* resp) {
#if VDEV_HAS_AXIL
    Vdev* t = d->top;
    uint32_t a[2] = {addr, 0}, v[2] = {data, 0}, s[2] = {strb, 0};
    d->op = AxilOp{write != 0, addr, data, strb};
    d->axil_busy = true;
    d->axil_done = false;
    if (write) {
        vdev_put(t->S_AXIL(awaddr), a);
        vdev_put(t->S_AXIL(wdata), v);
        vdev_put(t->S_AXIL(wstrb), s);
        d->aw_pending = d->w_pending = true;
    } else {
        vdev_put(t->S_AXIL(araddr), a);
        d->ar_pending = true;
    }
    for (uint64_t i = 0; i < max_cycles && !d->axil_done; ++i) step(d);
    if (!d->axil_done) {
        // Abandon the transaction so the bus is usable after a reset.
        d->axil_busy = d->aw_pending = d->w_pending = d->ar_pending = false;
        return -1;
    }
    *rdata = d->axil_rdata;
    *resp = d->axil_resp;
    return 0;
#else
    (void)d; (void)write; (void)addr; (void)data; (void)strb; (void)max_cycles;
    (void)rdata; (void)resp;
    return -2;
#endif
}

}  // extern "C"
