//! A live run's whole-run profiles, grown from the recorder's per-interval chunks.
//!
//! Each interval the recorder hands the live screen what it appended to stacks.jsonl:
//! the stacks new since the last chunk and the interval's weights. The whole run's
//! on-CPU, off-CPU and resident-growth profiles grow from them in place, in time linear
//! in what the interval added ([`FlameState::add_stacks`]), where a copy of the whole
//! profile each second would cost the sampler a copy and the screen a rebuild in
//! proportion to every stack the run ever had (a million nodes for a profile of 100,000
//! distinct stacks of depth 10 to 60).
//!
//! The whole run's profile of a kind is held by its flame pane, or, while the timeline
//! shows a part of the run, set aside in [`Timeline::whole`](super::timeline::Timeline)
//! — the same tree either way, so the node each stack of the table was given stays
//! valid as the tree moves between them ([`WholeRun`] remembers it).

use benchtop_sessions::intervals::{ChunkIds, IntervalStacks, StacksChunk};
use benchtop_sessions::{ByKind, Kind};
use benchtop_sessions::{FrameId, NodeId, StackTree};

use super::State;
use super::flame::FlameState;

/// A stack of the table not given a node yet.
const UNMAPPED: NodeId = NodeId(u32::MAX);

/// Whether `kind`'s whole-run profile grows from chunks: the kinds weighed per interval.
fn grows(kind: Kind) -> bool {
    kind.spec().interval_field.is_some()
}

/// What a live run's whole-run profiles were grown with: per kind, the node of each
/// stack of the timeline's table in the tree that holds that kind.
#[derive(Debug, Default)]
pub struct WholeRun {
    kinds: ByKind<KindNodes>,
    /// On-CPU samples so far (the samples-per-second chart's count).
    pub samples: u64,
    /// Reused: the stacks of one interval and what they weigh, and a walk up the table.
    adds: Vec<(NodeId, u64)>,
    chain: Vec<u32>,
}

/// The nodes of one kind's tree, by index of the table; for off-CPU, the nanoseconds
/// below a whole microsecond carried over per stack (the tree counts microseconds, as
/// offcpu.folded does).
#[derive(Debug, Default)]
struct KindNodes {
    nodes: Vec<NodeId>,
    carry: Vec<u64>,
}

impl WholeRun {
    /// Forgets the nodes given out: the trees that held them were replaced.
    pub fn forget(&mut self) {
        for (_, k) in self.kinds.iter_mut() {
            k.nodes.clear();
            k.carry.clear();
        }
    }
}

/// Where one kind's whole-run profile is: in its pane, or set aside while the timeline
/// shows a part of the run.
enum Holder<'a> {
    Pane(&'a mut FlameState),
    Aside(&'a mut StackTree),
}

impl Holder<'_> {
    fn intern(&mut self, name: &str) -> FrameId {
        match self {
            Holder::Pane(p) => p.intern(name),
            Holder::Aside(t) => t.intern(name),
        }
    }

    fn node_under(&mut self, parent: NodeId, frame: FrameId) -> NodeId {
        match self {
            Holder::Pane(p) => p.node_under(parent, frame),
            Holder::Aside(t) => t.node_under(parent, frame),
        }
    }

    fn add(&mut self, adds: &[(NodeId, u64)]) {
        match self {
            Holder::Pane(p) => p.add_stacks(adds),
            Holder::Aside(t) => {
                for &(node, weight) in adds {
                    t.add_at(node, weight);
                }
            }
        }
    }
}

/// The node of the table's stack `index` in `holder`'s tree, made (with its callers)
/// when new; `None` for an index past the table.
fn node_of(
    nodes: &mut Vec<NodeId>,
    chain: &mut Vec<u32>,
    table: &IntervalStacks,
    holder: &mut Holder<'_>,
    index: u32,
) -> Option<NodeId> {
    let known =
        |nodes: &[NodeId], i: u32| nodes.get(i as usize).filter(|&&n| n != UNMAPPED).copied();
    if let Some(node) = known(nodes, index) {
        return Some(node);
    }
    // Up the table to a stack with a node (or past the root frame), then down again
    // making nodes: a parent's index is below its child's, so the walk ends.
    chain.clear();
    let mut at = Some(index);
    let mut node = NodeId::ROOT;
    while let Some(i) = at {
        if let Some(n) = known(nodes, i) {
            node = n;
            break;
        }
        chain.push(i);
        at = table.stack(i)?.0;
    }
    for &i in chain.iter().rev() {
        let (_, name) = table.stack(i)?;
        let frame = holder.intern(name);
        node = holder.node_under(node, frame);
        if nodes.len() <= i as usize {
            nodes.resize(i as usize + 1, UNMAPPED);
        }
        nodes[i as usize] = node;
    }
    Some(node)
}

impl State {
    /// Grows the whole run's profiles and source lines by a chunk that
    /// [`IntervalStacks::append`] has just taken into the timeline's table (`ids`
    /// translating its stack ids), and counts its on-CPU samples.
    pub(super) fn grow_whole_run(&mut self, chunk: &StacksChunk) {
        let live = &mut self.live;
        let t = &mut live.timeline;
        let Some(table) = t.stacks.as_ref() else {
            return;
        };
        let ids: &ChunkIds = &t.live_ids;
        let grow = &mut t.grow;
        for kind in Kind::ALL.into_iter().filter(|&k| grows(k)) {
            let spec = kind.spec();
            // Interval weights in the unit of the kind's tree (off-CPU ns into µs), the
            // rest carried per stack.
            let per = spec
                .interval_unit
                .and_then(|u| u.per(spec.folded_unit))
                .unwrap_or(1);
            let adds = &mut grow.adds;
            adds.clear();
            let mut holder = match t.whole.as_mut() {
                Some(whole) if super::timeline::is_part_kind(kind) => {
                    Holder::Aside(whole[kind].get_or_insert_with(StackTree::new))
                }
                _ => Holder::Pane(live.flames.pane_mut(kind)),
            };
            let KindNodes { nodes, carry } = &mut grow.kinds[kind];
            for interval in &chunk.intervals {
                for w in &interval.weights[kind] {
                    let Some(index) = ids.stack_index(w.stack) else {
                        continue;
                    };
                    let mut weight = w.weight;
                    if per > 1 {
                        if carry.len() <= index as usize {
                            carry.resize(index as usize + 1, 0);
                        }
                        let fine = weight.saturating_add(carry[index as usize]);
                        carry[index as usize] = fine % per;
                        weight = fine / per;
                    }
                    if weight == 0 {
                        continue;
                    }
                    if kind == Kind::Cpu {
                        grow.samples = grow.samples.saturating_add(weight);
                    }
                    if let Some(node) = node_of(nodes, &mut grow.chain, table, &mut holder, index) {
                        adds.push((node, weight));
                    }
                }
            }
            if !adds.is_empty() {
                holder.add(adds);
            }
        }
        let opts = super::timeline_live::live_limits(t.max_stacks);
        table.append_lines(chunk, &mut t.live_ids, &mut live.flames.views.lines, &opts);
        live.run.activity.add_samples(t.grow.samples);
        if grows(live.flames.kind) {
            live.flames.refresh_views();
        }
    }
}
