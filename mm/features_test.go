package mm

import "mmlab/machine"

// testFeatures are the features of the tests that do not depend on them:
// a machine without protection keys.
var testFeatures = machine.MustNamed("x86-64").Features
