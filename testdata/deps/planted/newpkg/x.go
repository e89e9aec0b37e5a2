// Planted: a package with no row.
package newpkg
