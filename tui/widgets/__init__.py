"""Reusable widgets: call tree, heatmap, image pane, histogram, sparkline, tensor card, …"""
