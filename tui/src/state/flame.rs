//! The flame pane's model: a laid-out stack tree, zoom and search.
