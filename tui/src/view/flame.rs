//! The flame pane: an icicle drawn from the laid-out stack tree.
