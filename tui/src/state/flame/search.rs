//! The flame pane's search: which frames match, how many nodes and how much weight under
//! the zoomed node, and stepping from match to match.
//!
//! A query matches whole path segments by default: `lock` finds `Mutex<T>::lock` and
//! `lock@plt`, not `block_on` or `clock_gettime`. Where the query begins or ends with a
//! letter, digit or `_`, the name must not go on with one there, so a query may span
//! segments (`mutex::lock`) but never cut a word. Substring search
//! ([`FlameState::set_substring`]) matches anywhere.

use benchtop_sessions::{FrameId, NodeId};

use super::tree::ViewTree;
use super::{FlameState, share};

/// The search and what it found under the zoomed node.
#[derive(Debug, Default)]
pub(super) struct Search {
    /// The query as given; empty when not searching.
    pub(super) query: String,
    /// The query matches anywhere in a name, not only whole path segments.
    pub(super) substring: bool,
    /// Whether each frame of the tree matches, by [`FrameId`].
    pub(super) frame_matches: Vec<bool>,
    /// Matching nodes under the zoomed node (itself included).
    matches: usize,
    /// Weight of the stacks through a match under the zoomed node, each counted once.
    matched_weight: u64,
    /// Reused while counting: per node, whether it is under the zoomed node and a match.
    node_flags: Vec<u8>,
    /// Reused while matching: the frame names lowered, a line each, and where each starts.
    names: String,
    starts: Vec<usize>,
}

impl FlameState {
    /// Searches frame names for `query`, ignoring case, as whole path segments unless
    /// [`FlameState::set_substring`] asked for substrings; an empty query ends the search.
    /// The selection stays where it is: [`FlameState::next_match`] moves to a match.
    pub fn search(&mut self, query: &str) {
        if self.search.query == query {
            return;
        }
        self.search.query.clear();
        self.search.query.push_str(query);
        self.match_frames();
        for row in &mut self.rows {
            for b in row {
                b.matched = chain_matches(&self.search.frame_matches, &self.view, b.node, b.last);
            }
        }
        self.count_matches();
    }

    /// The query searched for; empty when not searching.
    pub fn query(&self) -> &str {
        &self.search.query
    }

    /// Matches the query anywhere in a name (`true`), or only as whole path segments
    /// (`false`, the default); the search is run again.
    pub fn set_substring(&mut self, on: bool) {
        if self.search.substring == on {
            return;
        }
        self.search.substring = on;
        let query = std::mem::take(&mut self.search.query);
        self.search(&query);
    }

    /// Whether the query matches anywhere in a name, not only whole path segments.
    pub fn substring(&self) -> bool {
        self.search.substring
    }

    /// Whether the name of `frame` (of [`FlameState::tree`]) holds the query; false when
    /// not searching.
    pub fn frame_matches(&self, frame: FrameId) -> bool {
        self.search
            .frame_matches
            .get(frame.0 as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Matching nodes under the zoomed node, itself included (a node per stack prefix, so a
    /// frame called from two places counts twice). Some may be too narrow to be laid out.
    pub fn matches(&self) -> usize {
        self.search.matches
    }

    /// The share of the zoomed node's total in stacks through a match (0 to 1), each stack
    /// counted once even when a match is nested in another.
    pub fn match_share(&self) -> f64 {
        share(self.search.matched_weight, self.zoom_total())
    }

    /// The weight of the stacks through a match under the zoomed node, each counted once.
    pub fn matched_weight(&self) -> u64 {
        self.search.matched_weight
    }

    /// Selects the next matching box in layout order (rows top to bottom, boxes left to
    /// right), wrapping around (`n`). False when no laid-out box matches.
    pub fn next_match(&mut self) -> bool {
        self.step_match(true)
    }

    /// Selects the previous matching box in layout order, wrapping around (`N`). False when
    /// no laid-out box matches.
    pub fn prev_match(&mut self) -> bool {
        self.step_match(false)
    }

    fn step_match(&mut self, forward: bool) -> bool {
        let positions = || {
            self.rows
                .iter()
                .enumerate()
                .flat_map(|(r, row)| row.iter().enumerate().map(move |(i, b)| ((r, i), b)))
                .filter(|(_, b)| b.matched)
                .map(|(p, _)| p)
        };
        let found = match (self.selected, forward) {
            (Some(at), true) => positions().find(|&p| p > at).or_else(|| positions().next()),
            (Some(at), false) => positions()
                .take_while(|&p| p < at)
                .last()
                .or_else(|| positions().next_back()),
            (None, true) => positions().next(),
            (None, false) => positions().next_back(),
        };
        match found {
            Some(p) => {
                self.selected = Some(p);
                true
            }
            None => false,
        }
    }

    /// Which frames match the search, by id.
    pub(super) fn match_frames(&mut self) {
        let search = &mut self.search;
        search.frame_matches.clear();
        if search.query.is_empty() {
            // The buffers hold as much as the names: give them back with the search.
            search.names = String::new();
            search.starts = Vec::new();
            search.node_flags = Vec::new();
            return;
        }
        let tree = &self.tree;
        let substring = search.substring;
        search.frame_matches.resize(tree.frame_count(), false);
        let needle = search.query.to_lowercase();
        // Names hold no line breaks, so neither can a match.
        if needle.contains('\n') {
            return;
        }
        // All names lowered into one text, a line each, searched in one pass: a searcher
        // per name would cost more to set up than to run.
        let (text, starts) = (&mut search.names, &mut search.starts);
        text.clear();
        starts.clear();
        for i in 0..tree.frame_count() {
            starts.push(text.len());
            let name = tree.name(FrameId(i as u32));
            if needle.is_ascii() {
                // Only ASCII letters can match an ASCII needle's: lowered below, at once.
                text.push_str(name);
            } else {
                text.extend(name.chars().flat_map(char::to_lowercase));
            }
            text.push('\n');
        }
        if needle.is_ascii() {
            text.make_ascii_lowercase();
        }
        let mut frame = 0;
        let mut mark = |at: usize| {
            while starts.get(frame + 1).is_some_and(|&next| next <= at) {
                frame += 1;
            }
            if let Some(m) = search.frame_matches.get_mut(frame) {
                *m = true;
            }
        };
        let pattern = needle.as_bytes();
        let bytes = text.as_bytes();
        let whole = Whole::of(pattern, substring);
        // Look for the needle's rarest ASCII byte with memchr (as `str::match_indices` of a
        // char does) and compare around each: several times faster than the general
        // substring search on names that share most of their letters.
        let rarest = pattern
            .iter()
            .enumerate()
            .filter(|(_, b)| b.is_ascii())
            .min_by_key(|&(_, &b)| commonness(b));
        match rarest {
            Some((offset, &rare)) => {
                for (at, _) in text.match_indices(char::from(rare)) {
                    let Some(start) = at.checked_sub(offset) else {
                        continue;
                    };
                    if bytes[start..].starts_with(pattern) && whole.holds(bytes, start) {
                        mark(start);
                    }
                }
            }
            None => text
                .match_indices(needle.as_str())
                .filter(|&(at, _)| whole.holds(bytes, at))
                .for_each(|(at, _)| mark(at)),
        }
    }

    /// Counts the matches under the zoomed node and the weight through them.
    pub(super) fn count_matches(&mut self) {
        let search = &mut self.search;
        search.matches = 0;
        search.matched_weight = 0;
        if search.query.is_empty() {
            return;
        }
        // Parents come before their children in a ViewTree: one pass in id order from the
        // zoomed node sees each parent before its children, and reads memory in order
        // where a walk from the root would jump.
        const IN_ZOOM: u8 = 1;
        const UNDER_MATCH: u8 = 2;
        let tree = &self.view;
        let zoom = self.zoom_path.last().copied().unwrap_or(NodeId::ROOT);
        let flags = &mut search.node_flags;
        flags.clear();
        flags.resize(tree.node_count(), 0);
        flags[zoom.0 as usize] = IN_ZOOM;
        if zoom != NodeId::ROOT && frame_matches(&search.frame_matches, tree, zoom) {
            search.matches += 1;
            search.matched_weight = tree.node(zoom).total_weight;
            flags[zoom.0 as usize] |= UNDER_MATCH;
        }
        for i in zoom.0 as usize + 1..tree.node_count() {
            let id = NodeId(i as u32);
            let node = tree.node(id);
            let above = flags[node.parent.0 as usize];
            if above & IN_ZOOM == 0 {
                continue;
            }
            let mut flag = above;
            if frame_matches(&search.frame_matches, tree, id) {
                search.matches += 1;
                if above & UNDER_MATCH == 0 {
                    search.matched_weight = search.matched_weight.saturating_add(node.total_weight);
                }
                flag |= UNDER_MATCH;
            }
            flags[i] = flag;
        }
    }
}

/// Whether `node`'s frame matches (false for the root and when not searching).
pub(super) fn frame_matches(frame_matches: &[bool], tree: &ViewTree, node: NodeId) -> bool {
    node != NodeId::ROOT
        && frame_matches
            .get(tree.node(node).frame.0 as usize)
            .copied()
            .unwrap_or(false)
}

/// Whether a frame of the chain from `first` down to `last` matches.
pub(super) fn chain_matches(
    matches: &[bool],
    tree: &ViewTree,
    first: NodeId,
    last: NodeId,
) -> bool {
    if matches.is_empty() {
        return false;
    }
    let mut n = last;
    loop {
        if frame_matches(matches, tree, n) {
            return true;
        }
        if n == first || n == NodeId::ROOT {
            return false;
        }
        n = tree.node(n).parent;
    }
}

/// Where a match found in the lowered names must not be cut out of a longer word: before
/// its start when the query begins with a word byte, after its end when it ends with one.
struct Whole {
    /// The query's length in bytes.
    len: usize,
    /// Check the byte before the match.
    before: bool,
    /// Check the byte after the match.
    after: bool,
}

impl Whole {
    /// The checks of `pattern`; none when `substring`.
    fn of(pattern: &[u8], substring: bool) -> Whole {
        let word = |b: Option<&u8>| !substring && b.is_some_and(|&b| is_word(b));
        Whole {
            len: pattern.len(),
            before: word(pattern.first()),
            after: word(pattern.last()),
        }
    }

    /// Whether the match at `start` of `text` is whole.
    fn holds(&self, text: &[u8], start: usize) -> bool {
        let before = start.checked_sub(1).and_then(|i| text.get(i));
        let after = text.get(start + self.len);
        !(self.before && before.is_some_and(|&b| is_word(b))
            || self.after && after.is_some_and(|&b| is_word(b)))
    }
}

/// A byte of a word in a name: a letter, digit or `_`, or any byte of a non-ASCII
/// character (letters of other scripts).
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || !b.is_ascii()
}

/// How common a byte is in frame names, roughly: 0 (rare) to 3 (in most names).
fn commonness(b: u8) -> u8 {
    match b {
        b':' | b'_' | b'e' | b't' | b'a' | b'o' | b'i' | b'n' | b's' | b'r' => 3,
        b'h' | b'l' | b'd' | b'c' | b'u' | b'm' | b'f' | b'p' | b'g' | b'<' | b'>' | b' ' => 2,
        b'0'..=b'9' | b'w' | b'y' | b'b' | b'v' | b'k' | b'.' | b'&' | b'-' => 1,
        _ => 0,
    }
}
