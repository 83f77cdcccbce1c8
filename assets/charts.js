// Charts of the connection page (uPlot); written by the connections pages.
