package main

import "mmlab/replay"

func init() { modelReplay = replay.Run }
