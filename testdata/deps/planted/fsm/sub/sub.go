// Planted: a subpackage without a row of its own.
package sub

import "coord/server"

var _ = server.Run
