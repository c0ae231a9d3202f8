//! Views of the same profile, shown in the flame pane's place, each one key away: top
//! functions ([`top`]), the bottom-up tree ([`inverted`]), callers and callees of one
//! function ([`butterfly`]) and its source lines ([`source`]).
//!
//! The views are built from the flame pane's tree when one shows, when the tree changes
//! while it shows (a live run hands a new one about once a second), and on their keys —
//! never per frame. What they need of every function (self and total weight, where it
//! occurs) the stack tree keeps as stacks are added ([`index`]), so a build costs about
//! the functions listed, not the tree's nodes. The selected function is held by name, so
//! it survives a new tree; Enter on a row selects it here and in the flamegraph.
//!
//! ```
//! use benchtop::state::flame_panes::FlamePanes;
//! use benchtop::state::profile_views::{ViewKind, ViewsAction};
//! use benchtop_sessions::{Kind, StackTree};
//!
//! let mut tree = StackTree::new();
//! tree.add_names(["main", "parse", "lex"], 3);
//! tree.add_names(["main", "eval"], 5);
//! let mut panes = FlamePanes::default();
//! drop(panes.panes[Kind::Cpu].set_tree(tree));
//! panes.act_views(ViewsAction::Show(ViewKind::Top));
//! let top = &panes.views.top;
//! assert_eq!(panes.panes[Kind::Cpu].tree().name(top.rows[0].frame), "eval");
//! ```

pub mod butterfly;
pub mod index;
pub mod inverted;
pub mod source;
pub mod top;

use std::path::PathBuf;

use benchtop_sessions::lines::FrameLines;

use super::Kind;
use super::flame::FlameState;
use super::flame_panes::FlamePanes;
use butterfly::Butterfly;
use inverted::Inverted;
use source::SourceView;
use top::TopTable;

/// What the flame pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ViewKind {
    /// The flamegraph (icicle).
    #[default]
    Flame,
    /// Top functions by self and total weight.
    Top,
    /// The bottom-up (inverted) call tree.
    Inverted,
    /// Callers and callees of the selected function.
    Butterfly,
    /// Source lines of the selected function.
    Source,
}

impl ViewKind {
    /// How the pane's title names it.
    pub fn title(self) -> &'static str {
        match self {
            ViewKind::Flame => "flamegraph",
            ViewKind::Top => "top functions",
            ViewKind::Inverted => "bottom-up",
            ViewKind::Butterfly => "callers/callees",
            ViewKind::Source => "source",
        }
    }
}

/// What a key does in a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewsAction {
    /// Show this view in the flame pane's place.
    Show(ViewKind),
    /// The row above (the source: scroll up).
    Up,
    /// The row below (the source: scroll down).
    Down,
    /// Bottom-up: show the selected row's callers.
    Expand,
    /// Bottom-up: hide them, or go to the row's parent.
    Collapse,
    /// Select the row's function everywhere.
    Enter,
    /// Top functions: sort by the next column.
    SortNext,
    /// Top functions: sort by the previous column.
    SortPrev,
}

/// The views and what they share: the selected function and the source lines.
#[derive(Debug, Default)]
pub struct ProfileViews {
    /// The view shown.
    pub kind: ViewKind,
    /// The selected function's name; empty when none was selected.
    pub function: String,
    /// Top functions.
    pub top: TopTable,
    /// The bottom-up tree.
    pub inverted: Inverted,
    /// Callers and callees.
    pub butterfly: Butterfly,
    /// Source lines.
    pub source: SourceView,
    /// The on-CPU stacks' source lines.
    pub lines: FrameLines,
    /// Why the profile has no source lines, when it is known (an older session).
    pub no_lines: Option<String>,
    /// The session whose stacks.jsonl holds the lines, once there is one (an opened
    /// session, a run that ended): read when the source view first needs them.
    pub lines_dir: Option<PathBuf>,
    /// The lines were asked for from `lines_dir`.
    lines_asked: bool,
    /// The session directory whose lines the loop should read ([`ProfileViews::take_loads`]).
    pending_lines: Option<PathBuf>,
    /// A source file the source view needs and the loop should read
    /// ([`ProfileViews::take_loads`]).
    pending_read: Option<String>,
}

impl FlamePanes {
    /// The stacks shown changed (a new tree, the other kind, the search): the views are
    /// built again if one shows.
    pub fn refresh_views(&mut self) {
        self.build_view()
    }

    /// Carries out a view's key.
    pub fn act_views(&mut self, action: ViewsAction) {
        let (flame, views) = (&mut self.panes[self.kind], &mut self.views);
        match action {
            ViewsAction::Show(kind) => {
                if views.kind == ViewKind::Flame
                    && let Some(b) = flame.selected_box()
                {
                    views.function = flame.name(b.node).to_owned();
                }
                // Callers and source from a list are the selected row's, as Enter then
                // the key would give.
                let row = match views.kind {
                    ViewKind::Top => views.top.selected_row().map(|r| r.frame),
                    ViewKind::Inverted => views.inverted.selected_frame(),
                    ViewKind::Flame | ViewKind::Butterfly | ViewKind::Source => None,
                };
                if matches!(kind, ViewKind::Butterfly | ViewKind::Source)
                    && let Some(frame) = row
                {
                    views.function = flame.tree().name(frame).to_owned();
                    let name = views.function.clone();
                    flame.select_frame(&name);
                }
                if kind == ViewKind::Top && views.kind != ViewKind::Top {
                    // Opened, the table starts at its hottest function, as perf top does,
                    // and lists every function until a search is typed here.
                    views.top.reset();
                }
                views.kind = kind;
                if kind == ViewKind::Flame && !views.function.is_empty() {
                    flame.select_frame(&views.function);
                }
            }
            ViewsAction::Up | ViewsAction::Down => {
                let by: isize = if action == ViewsAction::Up { -1 } else { 1 };
                let step = |at: &mut usize, len: usize| {
                    *at = at.saturating_add_signed(by).min(len.saturating_sub(1));
                };
                match views.kind {
                    ViewKind::Flame => {}
                    ViewKind::Top => {
                        let mut at = views.top.selected;
                        step(&mut at, views.top.rows.len());
                        views.top.select(at, flame.tree());
                    }
                    ViewKind::Inverted => {
                        step(&mut views.inverted.selected, views.inverted.rows.len());
                    }
                    ViewKind::Butterfly => {
                        let len = views.butterfly.len();
                        step(&mut views.butterfly.selected, len);
                    }
                    ViewKind::Source => views.source.scroll(by),
                }
                return;
            }
            ViewsAction::Expand | ViewsAction::Collapse => {
                if views.kind != ViewKind::Inverted
                    || !views
                        .inverted
                        .set_expanded(flame.tree(), action == ViewsAction::Expand)
                {
                    return;
                }
            }
            ViewsAction::SortNext | ViewsAction::SortPrev => {
                if views.kind != ViewKind::Top {
                    return;
                }
                let sort = views.top.sort;
                views.top.sort = match action {
                    ViewsAction::SortNext => sort.next(),
                    _ => sort.prev(),
                };
            }
            ViewsAction::Enter => {
                let tree = flame.tree();
                let frame = match views.kind {
                    ViewKind::Flame | ViewKind::Source => None,
                    ViewKind::Top => views.top.selected_row().map(|r| r.frame),
                    ViewKind::Inverted => views.inverted.selected_frame(),
                    ViewKind::Butterfly => views.butterfly.frame_of(views.butterfly.selected),
                };
                let Some(frame) = frame else {
                    return;
                };
                views.function = tree.name(frame).to_owned();
                let name = views.function.clone();
                flame.select_frame(&name);
            }
        }
        self.build_view()
    }

    /// Builds the view shown from the tree shown.
    fn build_view(&mut self) {
        let kind = self.kind;
        let (flame, views) = (&self.panes[kind], &mut self.views);
        views.build(flame, kind)
    }
}

impl ProfileViews {
    fn build(&mut self, flame: &FlameState, kind: Kind) {
        if self.kind == ViewKind::Flame {
            return;
        }
        let tree = flame.tree();
        if self.kind == ViewKind::Source {
            if self.lines.is_empty()
                && !self.lines_asked
                && let Some(dir) = &self.lines_dir
            {
                self.lines_asked = true;
                self.pending_lines = Some(dir.clone());
                self.no_lines = Some("reading the session's source lines…".into());
            }
            // Source lines are recorded for on-CPU samples only.
            let on_cpu = kind == Kind::Cpu;
            let no_lines = match on_cpu {
                true => self.no_lines.as_deref(),
                false => Some("source lines are recorded for on-CPU samples only"),
            };
            let empty = FrameLines::default();
            let lines = if on_cpu { &self.lines } else { &empty };
            if let Some(file) = self.source.rebuild(&self.function, lines, no_lines) {
                self.pending_read = Some(file);
            }
            return;
        }
        match self.kind {
            ViewKind::Flame | ViewKind::Source => {}
            ViewKind::Top => {
                let searching = self.top.filtered && !flame.query().is_empty();
                self.top
                    .rebuild(tree, |f| !searching || flame.frame_matches(f));
            }
            ViewKind::Inverted => self.inverted.rebuild(tree),
            ViewKind::Butterfly => self.butterfly.rebuild(tree, &self.function),
        }
    }

    /// What the views asked the loop to read, once: a session's source lines, a source
    /// file.
    pub fn take_loads(&mut self) -> (Option<PathBuf>, Option<String>) {
        (self.pending_lines.take(), self.pending_read.take())
    }

    /// The source lines read from `dir`'s stacks.jsonl, or why there are none.
    pub fn set_session_lines(&mut self, dir: &std::path::Path, lines: Result<FrameLines, String>) {
        if self.lines_dir.as_deref() != Some(dir) {
            return;
        }
        match lines {
            Ok(lines) if lines.is_empty() => {
                self.no_lines = Some(
                    "the session has no source lines (recorded before benchtop kept them, \
                     with names-only symbols, or from binaries without line tables)"
                        .into(),
                );
            }
            Ok(lines) => {
                self.no_lines = None;
                self.lines = lines;
            }
            Err(why) => self.no_lines = Some(why),
        }
    }

    /// The source lines of the on-CPU stacks (a live run's so far).
    pub fn set_lines(&mut self, lines: FrameLines) {
        self.lines = lines;
    }
}

#[cfg(test)]
mod tests {
    use benchtop_sessions::StackTree;

    use super::*;

    /// A profile with a known answer: `alloc` is called from two places (parse: 10,
    /// eval: 20), `eval` has self time, and 100 samples in all.
    pub(crate) fn known() -> StackTree {
        let mut t = StackTree::new();
        for (stack, w) in [
            ("main;parse;lex", 30),
            ("main;parse;alloc", 10),
            ("main;eval;alloc", 20),
            ("main;eval", 25),
            ("main;idle", 15),
        ] {
            t.add_names(stack.split(';'), w);
        }
        t
    }

    fn panes() -> FlamePanes {
        let mut p = FlamePanes::default();
        drop(p.panes[Kind::Cpu].set_tree(known()));
        p
    }

    fn name(p: &FlamePanes, f: benchtop_sessions::FrameId) -> &str {
        p.panes[Kind::Cpu].tree().name(f)
    }

    #[test]
    fn top_functions_sort_by_self_then_total_and_filter_by_the_search() {
        let mut p = panes();
        p.act_views(ViewsAction::Show(ViewKind::Top));
        let rows = |p: &FlamePanes| -> Vec<(String, u64, u64)> {
            p.views
                .top
                .rows
                .iter()
                .map(|r| (name(p, r.frame).to_owned(), r.self_weight, r.total_weight))
                .collect()
        };
        let by_self = rows(&p);
        assert_eq!(
            by_self,
            [
                ("alloc".to_owned(), 30, 30),
                ("lex".to_owned(), 30, 30),
                ("eval".to_owned(), 25, 45),
                ("idle".to_owned(), 15, 15),
                ("main".to_owned(), 0, 100),
                ("parse".to_owned(), 0, 40),
            ]
        );
        p.act_views(ViewsAction::SortNext);
        let by_total: Vec<String> = rows(&p).into_iter().map(|r| r.0).collect();
        assert_eq!(by_total, ["main", "eval", "parse", "alloc", "lex", "idle"]);
        // A search typed while the table shows filters it (substrings here).
        p.views.top.filtered = true;
        p.panes[Kind::Cpu].set_substring(true);
        p.panes[Kind::Cpu].search("A");
        p.refresh_views();
        let matching: Vec<String> = rows(&p).into_iter().map(|r| r.0).collect();
        assert_eq!(matching, ["main", "eval", "parse", "alloc"]);
        assert_eq!(p.views.top.hidden, 2);
    }

    #[test]
    fn enter_on_a_row_selects_the_function_in_every_view_and_the_flamegraph() {
        let mut p = panes();
        p.act_views(ViewsAction::Show(ViewKind::Top));
        // The flamegraph's selection (its widest frame) is the function until Enter; the
        // table opens on its first row.
        assert_eq!(p.views.function, "main");
        assert_eq!(p.views.top.selected, 0);
        p.act_views(ViewsAction::Down);
        p.act_views(ViewsAction::Up);
        p.act_views(ViewsAction::Up);
        p.act_views(ViewsAction::Enter);
        assert_eq!(p.views.function, "alloc");
        let selected = p.panes[Kind::Cpu]
            .selected_box()
            .map(|b| p.panes[Kind::Cpu].name(b.node));
        assert_eq!(selected, Some("alloc"));
        // Its heaviest place: under eval.
        let b = p.panes[Kind::Cpu].selected_box().unwrap().node;
        assert_eq!(p.panes[Kind::Cpu].total(b), 20);
        p.act_views(ViewsAction::Show(ViewKind::Butterfly));
        assert_eq!(
            p.views.butterfly.function.map(|f| name(&p, f)),
            Some("alloc")
        );
    }

    #[test]
    fn callers_and_source_from_a_list_are_the_selected_rows() {
        let mut p = panes();
        // Bottom-up: lex, lex<parse, alloc, …; on alloc, `c` shows alloc's callers.
        p.act_views(ViewsAction::Show(ViewKind::Inverted));
        p.act_views(ViewsAction::Down);
        p.act_views(ViewsAction::Down);
        p.act_views(ViewsAction::Show(ViewKind::Butterfly));
        assert_eq!(p.views.function, "alloc");
        assert_eq!(
            p.views.butterfly.function.map(|f| name(&p, f)),
            Some("alloc")
        );
        // Top functions by self: alloc, lex, eval, …; on eval, `c` then `a`.
        p.act_views(ViewsAction::Show(ViewKind::Top));
        p.act_views(ViewsAction::Down);
        p.act_views(ViewsAction::Down);
        p.act_views(ViewsAction::Show(ViewKind::Butterfly));
        assert_eq!(
            p.views.butterfly.function.map(|f| name(&p, f)),
            Some("eval")
        );
        let selected = p.panes[Kind::Cpu]
            .selected_box()
            .map(|b| p.panes[Kind::Cpu].name(b.node));
        assert_eq!(selected, Some("eval"), "the flamegraph follows");
        p.act_views(ViewsAction::Show(ViewKind::Top));
        p.act_views(ViewsAction::Show(ViewKind::Source));
        assert_eq!(
            p.views.function, "alloc",
            "the table opened on its first row"
        );
    }

    #[test]
    fn top_functions_opened_from_the_flamegraph_list_every_function() {
        let mut p = panes();
        p.panes[Kind::Cpu].search("alloc");
        p.act_views(ViewsAction::Show(ViewKind::Top));
        assert_eq!((p.views.top.rows.len(), p.views.top.hidden), (6, 0));
        p.views.top.filtered = true;
        p.refresh_views();
        assert_eq!((p.views.top.rows.len(), p.views.top.hidden), (1, 5));
        // Opened again from another view: unfiltered again.
        p.act_views(ViewsAction::Show(ViewKind::Flame));
        p.act_views(ViewsAction::Show(ViewKind::Top));
        assert_eq!(p.views.top.rows.len(), 6);
    }

    #[test]
    fn the_inverted_tree_has_the_functions_with_self_time_at_its_roots() {
        let mut p = panes();
        p.act_views(ViewsAction::Show(ViewKind::Inverted));
        let rows = |p: &FlamePanes| -> Vec<(String, u64)> {
            p.views
                .inverted
                .rows
                .iter()
                .map(|r| {
                    let path: Vec<&str> = r.path.iter().map(|&f| name(p, f)).collect();
                    (path.join("<"), r.weight)
                })
                .collect()
        };
        // The heaviest root opens by itself.
        assert_eq!(
            rows(&p),
            [
                ("lex".to_owned(), 30),
                ("lex<parse".to_owned(), 30),
                ("alloc".to_owned(), 30),
                ("eval".to_owned(), 25),
                ("idle".to_owned(), 15),
            ]
        );
        // alloc's callers: eval (20) before parse (10), each with its own callers.
        p.act_views(ViewsAction::Down);
        p.act_views(ViewsAction::Down);
        p.act_views(ViewsAction::Expand);
        let r = rows(&p);
        assert_eq!(r[3], ("alloc<eval".to_owned(), 20));
        assert_eq!(r[4], ("alloc<parse".to_owned(), 10));
        let roots: u64 = p
            .views
            .inverted
            .rows
            .iter()
            .filter(|r| r.path.len() == 1)
            .map(|r| r.weight)
            .sum();
        assert_eq!(roots, 100, "the roots' self weights are the whole profile");
        p.act_views(ViewsAction::Down);
        p.act_views(ViewsAction::Collapse);
        assert_eq!(
            p.views.inverted.selected, 2,
            "left on a child: its parent row"
        );
        p.act_views(ViewsAction::Collapse);
        assert_eq!(rows(&p).len(), 5);
    }

    #[test]
    fn callers_and_callees_merge_every_place_a_function_occurs() {
        let mut p = panes();
        assert!(p.panes[Kind::Cpu].select_frame("alloc"));
        p.act_views(ViewsAction::Show(ViewKind::Butterfly));
        let b = &p.views.butterfly;
        let callers: Vec<(&str, u64)> = b.callers.iter().map(|&(f, w)| (name(&p, f), w)).collect();
        assert_eq!(callers, [("eval", 20), ("parse", 10)]);
        assert!(b.callees.is_empty());
        assert_eq!((b.self_weight, b.total_weight), (30, 30));
        // Enter on a caller moves there: eval, called by main, calling alloc.
        p.act_views(ViewsAction::Up);
        p.act_views(ViewsAction::Up);
        p.act_views(ViewsAction::Enter);
        let b = &p.views.butterfly;
        let callers: Vec<(&str, u64)> = b.callers.iter().map(|&(f, w)| (name(&p, f), w)).collect();
        let callees: Vec<(&str, u64)> = b.callees.iter().map(|&(f, w)| (name(&p, f), w)).collect();
        assert_eq!(callers, [("main", 45)]);
        assert_eq!(callees, [("alloc", 20)]);
        assert_eq!((b.self_weight, b.total_weight), (25, 45));
    }

    #[test]
    fn the_source_view_asks_for_the_file_once_and_says_why_without_lines() {
        let mut p = panes();
        assert!(p.panes[Kind::Cpu].select_frame("lex"));
        p.act_views(ViewsAction::Show(ViewKind::Source));
        assert!(p.views.source.no_lines.is_some());
        assert_eq!(p.views.take_loads(), (None, None));
        let mut lines = FrameLines::default();
        lines.add("lex", "/src/lex.c", 7, 30);
        p.views.set_lines(lines);
        p.refresh_views();
        assert_eq!(p.views.take_loads(), (None, Some("/src/lex.c".to_owned())));
        p.refresh_views();
        assert_eq!(p.views.take_loads(), (None, None), "asked once");
        p.views.lines_dir = Some("/s".into());
        p.views.set_lines(FrameLines::default());
        p.refresh_views();
        assert_eq!(p.views.take_loads().0, Some(PathBuf::from("/s")));
        p.views
            .set_session_lines(std::path::Path::new("/s"), Ok(FrameLines::default()));
        p.refresh_views();
        let why = p.views.source.no_lines.clone().unwrap_or_default();
        assert!(why.contains("no source lines"), "{why}");
    }

    #[test]
    fn a_new_tree_keeps_the_view_and_the_selected_function() {
        let mut p = panes();
        assert!(p.panes[Kind::Cpu].select_frame("eval"));
        p.act_views(ViewsAction::Show(ViewKind::Butterfly));
        let mut t = known();
        t.add_names(["main", "eval", "lex"], 5);
        drop(p.panes[Kind::Cpu].set_tree(t));
        p.refresh_views();
        let b = &p.views.butterfly;
        assert_eq!(b.total_weight, 50);
        assert_eq!(b.callees.len(), 2);
    }
}
